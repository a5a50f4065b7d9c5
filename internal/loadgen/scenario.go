package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/orchard-rl/orchard/internal/llmtest"
)

// Model is the model name of every benchmark request and response.
const Model = "bench"

// Scenario is the shape of the agent traffic: an episode is Turns chat
// completion calls whose prompts grow from PromptMin to about PromptMax bytes
// (each turn resends the history plus the previous tool call and its result),
// each answered by a stream of ChunksMin..ChunksMax token events (reasoning,
// content, then a tool call's arguments; the last turn has no tool call).
// The same Scenario must be given to the upstream and to the client: both
// render the responses from it.
type Scenario struct {
	Turns      int `json:"turns"`       // calls per episode; default 8
	PromptMin  int `json:"prompt_min"`  // request bytes of turn 0; default 2048
	PromptMax  int `json:"prompt_max"`  // request bytes of the last turn, about; default 8192
	ChunksMin  int `json:"chunks_min"`  // token events per response, at least; default 50
	ChunksMax  int `json:"chunks_max"`  // at most; default 500
	ChunkBytes int `json:"chunk_bytes"` // text bytes per token event; default 4
	// FirstByteDelay is how long the upstream waits before its response
	// headers (time to first token). Default 0.
	FirstByteDelay time.Duration `json:"first_byte_delay_ns"`
	// ChunkDelay is the upstream's pause between two events. Default 0:
	// events go out as fast as the machine allows, the proxy's worst case.
	ChunkDelay time.Duration `json:"chunk_delay_ns"`
	Seed       uint64        `json:"seed"` // picks each turn's chunk count; default 7
	// NoLogprobs makes the upstream ignore the logprobs request field (as
	// this benchmark's upstream did before it honoured it), so the token
	// path carries token ids only; for comparing with earlier results.
	NoLogprobs bool `json:"no_logprobs,omitempty"`
	// Lifecycle makes closed-loop clients of orchard targets create each
	// episode through orchard's episode API before its first turn and
	// finish it after its last, as an RL rollout does (the floors have no
	// episode API). Off by default: the calls cost the clients time that
	// the floors do not spend.
	Lifecycle bool `json:"lifecycle,omitempty"`
}

// variantOf is the rendering the upstream sends for a request with these
// fields.
func (s *Scenario) variantOf(usage, tokenIDs, logprobs bool) variant {
	return variant{usage: usage, tokenIDs: tokenIDs, logprobs: logprobs && !s.NoLogprobs}
}

// Defaults fills the zero fields of s with their defaults.
func (s *Scenario) Defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.Turns, 8)
	def(&s.PromptMin, 2048)
	def(&s.PromptMax, 8192)
	def(&s.ChunksMin, 50)
	def(&s.ChunksMax, 500)
	def(&s.ChunkBytes, 4)
	if s.Seed == 0 {
		s.Seed = 7
	}
}

// Validate reports a scenario that cannot be rendered.
func (s *Scenario) Validate() error {
	switch {
	case s.Turns < 1 || s.Turns > 64:
		return fmt.Errorf("turns %d: want 1..64", s.Turns)
	case s.PromptMin < 1024 || s.PromptMax < s.PromptMin:
		return fmt.Errorf("prompt bytes %d..%d: want 1024 <= min <= max", s.PromptMin, s.PromptMax)
	case s.ChunksMin < 8 || s.ChunksMax < s.ChunksMin || s.ChunksMax > 100000:
		return fmt.Errorf("chunks %d..%d: want 8 <= min <= max <= 100000", s.ChunksMin, s.ChunksMax)
	case s.ChunkBytes < 1 || s.ChunkBytes > 4096:
		return fmt.Errorf("chunk bytes %d: want 1..4096", s.ChunkBytes)
	case s.FirstByteDelay < 0 || s.ChunkDelay < 0:
		return errors.New("delays must not be negative")
	}
	return nil
}

// chunks is the number of token events of turn k.
func (s *Scenario) chunks(k int) int {
	r := rand.New(rand.NewPCG(s.Seed, uint64(k)))
	return s.ChunksMin + r.IntN(s.ChunksMax-s.ChunksMin+1)
}

// lastTurn reports whether turn k ends the episode (no tool call).
func (s *Scenario) lastTurn(k int) bool { return k == s.Turns-1 }

// turn is the scripted generation of turn k.
func (s *Scenario) turn(k int) llmtest.Turn {
	n := s.chunks(k)
	// Shares chosen so that the history a turn adds (content and tool
	// call) stays within the prompt growth per turn.
	reasoning, args := n*3/5, 0
	if !s.lastTurn(k) {
		args = max(3, n*3/10)
	}
	content := max(1, n-reasoning-args)
	t := llmtest.Turn{PromptTokenIDs: s.promptIDs(k)}
	t.Reasoning = s.pieces(reasoning, 3*k)
	t.Content = s.pieces(content, 3*k+1)
	if args > 0 {
		a := append(llmtest.Pieces{`{"command":"`}, s.pieces(args-2, 3*k+2)...)
		t.ToolCalls = []llmtest.ToolCall{{ID: toolCallID(k), Name: "bash", Arguments: append(a, `"}`)}}
	}
	t.Logprobs = sampledLogprobs(reasoning+content+args, k)
	return t
}

// sampledLogprobs are n logprobs of sampled tokens as vLLM writes them: a
// float32 from the sampler, widened to a double and printed shortest, so
// most have 16 or 17 digits (-0.009614944458007812, -1.1920928244535389e-07).
// Three tokens in four are near certain (down to about -1e-6), the rest
// spread to -8. The same for the same salt.
func sampledLogprobs(n, salt int) []float64 {
	out := make([]float64, n)
	h := uint32(salt)*2654435761 + 1
	for i := range out {
		h = h*1664525 + 1013904223
		x := float64(h>>8) / (1 << 24) // in [0, 1)
		lp := -8*x - 1.0/(1<<20)
		if h&0x300 != 0 {
			lp = -math.Pow(10, -1-5*x)
		}
		out[i] = float64(float32(lp))
	}
	return out
}

func toolCallID(k int) string { return "call_bench_" + strconv.Itoa(k) }

// promptIDs are the prompt token ids vLLM reports for turn k: one per four
// prompt bytes, as a tokenizer would roughly give.
func (s *Scenario) promptIDs(k int) []int64 {
	ids := make([]int64, s.promptTarget(k)/4)
	for i := range ids {
		ids[i] = int64(1000 + i%50000)
	}
	return ids
}

// promptTarget is the intended request size of turn k.
func (s *Scenario) promptTarget(k int) int {
	if s.Turns == 1 {
		return s.PromptMin
	}
	return s.PromptMin + (s.PromptMax-s.PromptMin)*k/(s.Turns-1)
}

// pieces returns n pieces of ChunkBytes JSON-safe text each.
func (s *Scenario) pieces(n, salt int) llmtest.Pieces {
	out := make(llmtest.Pieces, n)
	text := filler(n*s.ChunkBytes, salt)
	for i := range out {
		out[i] = text[i*s.ChunkBytes : (i+1)*s.ChunkBytes]
	}
	return out
}

var words = strings.Fields(`the agent reads file main go and runs the tests then edits the handler to fix
a bug in stream parsing while checking errors logs output diff patch commit build lint vet format
function return value context cancel request response token chunk event proxy record store`)

// filler returns n bytes of lowercase words and spaces (safe in a JSON
// string without escaping), the same for the same salt.
func filler(n, salt int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for i := salt; b.Len() < n; i++ {
		b.WriteString(words[(i*7+salt)%len(words)])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// script is the llmtest script of the scenario.
func (s *Scenario) script() *llmtest.Script {
	sc := &llmtest.Script{Profile: llmtest.ProfileVLLM, Model: Model, Turns: make([]llmtest.Turn, s.Turns)}
	for k := range sc.Turns {
		sc.Turns[k] = s.turn(k)
	}
	return sc
}

// variant selects one rendering of a turn: the request fields that change
// the upstream's bytes.
type variant struct {
	usage    bool // stream_options.include_usage
	tokenIDs bool // return_token_ids
	logprobs bool // logprobs (one entry per token, no top_logprobs)
}

// variants are every combination of the request fields the upstream honours.
func variants() []variant {
	var out []variant
	for i := range 8 {
		out = append(out, variant{usage: i&1 != 0, tokenIDs: i&2 != 0, logprobs: i&4 != 0})
	}
	return out
}

// rendered holds every turn's stream, split into events, for each variant.
type rendered struct {
	events map[variant][][][]byte // [turn][event]
	bodies map[variant][][]byte   // [turn] whole body
}

// render asks llmtest for each turn's stream once.
func (s *Scenario) render() (*rendered, error) {
	h, err := s.handler()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	r := &rendered{events: map[variant][][][]byte{}, bodies: map[variant][][]byte{}}
	for _, v := range variants() {
		bodies, err := renderTurns(h, s.Turns, v)
		if err != nil {
			return nil, err
		}
		r.bodies[v] = bodies
		for _, body := range bodies {
			r.events[v] = append(r.events[v], splitEvents(body))
		}
	}
	return r, nil
}

// handler is the llmtest upstream that renders the scenario's streams.
func (s *Scenario) handler() (*llmtest.Handler, error) {
	h, err := llmtest.NewHandler(llmtest.Options{Scripts: map[string]*llmtest.Script{Model: s.script()}})
	if err != nil {
		return nil, fmt.Errorf("render scenario: %w", err)
	}
	return h, nil
}

// renderTurns asks h for the streams of turns 0..n-1 in variant v.
func renderTurns(h *llmtest.Handler, n int, v variant) ([][]byte, error) {
	out := make([][]byte, n)
	for k := range out {
		var err error
		if out[k], err = renderTurn(h, k, v); err != nil {
			return nil, fmt.Errorf("render turn %d %+v: %w", k, v, err)
		}
	}
	return out, nil
}

func renderTurn(h *llmtest.Handler, k int, v variant) ([]byte, error) {
	req := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":%t},"return_token_ids":%t,"logprobs":%t}`,
		Model, v.usage, v.tokenIDs, v.logprobs)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(req))
	r.Header.Set(llmtest.HeaderTurn, strconv.Itoa(k))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return nil, fmt.Errorf("llmtest answered %d: %s", w.Code, w.Body.Bytes())
	}
	if err := CheckTerminated(w.Body.Bytes()); err != nil {
		return nil, err
	}
	return w.Body.Bytes(), nil
}

// splitEvents cuts an SSE body after each blank line; the parts share
// body's memory.
func splitEvents(body []byte) [][]byte {
	var out [][]byte
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\n\n"))
		if i < 0 {
			out = append(out, body)
			break
		}
		out = append(out, body[:i+2])
		body = body[i+2:]
	}
	return out
}

// MarshalFlag encodes s for the upstream process's --scenario flag.
func (s *Scenario) MarshalFlag() string {
	b, _ := json.Marshal(s) // a struct of numbers cannot fail
	return string(b)
}

// ParseScenario decodes a --scenario flag value and applies the defaults.
func ParseScenario(v string) (Scenario, error) {
	var s Scenario
	if v != "" {
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return s, fmt.Errorf("parse scenario: %w", err)
		}
	}
	s.Defaults()
	return s, s.Validate()
}

// Requests returns the request bodies of one episode's turns, in turn
// order, as the closed-loop clients send them (a vLLM client's with
// askIDs): for benchmarks of the proxy's per-call work on the calls the
// load makes.
func (s *Scenario) Requests(episode string, askIDs bool) [][]byte {
	q := s.newRequests()
	if askIDs {
		q = q.askingIDs()
	}
	out := make([][]byte, s.Turns)
	for k := range out {
		out[k] = q.appendBody(nil, episode, k)
	}
	return out
}

// Bodies renders every turn's response body as the upstream sends it to a
// request with these fields, in turn order: for benchmarks of the proxy's
// per-stream work on exactly the streams the load carries.
func (s *Scenario) Bodies(usage, tokenIDs, logprobs bool) ([][]byte, error) {
	h, err := s.handler()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return renderTurns(h, s.Turns, s.variantOf(usage, tokenIDs, logprobs))
}
