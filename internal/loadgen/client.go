package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Outcome classifies one request.
type Outcome int

// Outcomes. Everything but OK is an error the benchmark must not have.
const (
	OK        Outcome = iota
	Transport         // no response: connect, write or read failed
	Status            // a status other than 200
	Truncated         // the stream ended without its terminal event
	Corrupt           // the stream ended properly but its bytes differ
	Timeout           // the request outlived its deadline
	Dropped           // open loop: not sent, too many requests in flight
	Lifecycle         // creating or finishing an episode through the episode API failed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "transport", "status", "truncated", "corrupt", "timeout", "dropped", "lifecycle"}

func (o Outcome) String() string { return outcomeNames[o] }

// terminal is the last event of an OpenAI-style chat stream.
var terminal = []byte("data: [DONE]\n\n")

// errNoTerminal says a stream ended without `data: [DONE]`.
var errNoTerminal = errors.New("stream ended without data: [DONE]")

// CheckTerminated reports an error unless body is a chat-completions SSE
// stream whose last event is `data: [DONE]`.
func CheckTerminated(body []byte) error {
	if !bytes.HasSuffix(body, terminal) {
		return errNoTerminal
	}
	if len(body) > len(terminal) && !bytes.HasSuffix(body[:len(body)-len(terminal)], []byte("\n\n")) {
		return errNoTerminal // [DONE] glued to an unterminated event
	}
	return nil
}

// Classify judges a received stream against the one the upstream sent.
func Classify(got, want []byte) Outcome {
	if CheckTerminated(got) != nil {
		return Truncated
	}
	if !bytes.Equal(got, want) {
		return Corrupt
	}
	return OK
}

// Result is one request's measurement.
type Result struct {
	Start   time.Time     // when it was sent (open loop: when it was due)
	TTFB    time.Duration // until the first byte of the body: the first token event
	Total   time.Duration // until the end of the body
	Bytes   int           // body bytes received
	Outcome Outcome
	Err     string // detail of a non-OK outcome
}

// Client sends scenario requests to one target and checks the answers. It is
// safe for concurrent use; each goroutine passes its own Buffers.
type Client struct {
	hc   *http.Client
	base string
	url  string // .../v1/chat/completions
	q    *requests
	want [][]byte // per turn: the stream the client must receive
}

// NewClient returns a client of the target at base (e.g.
// http://127.0.0.1:8080), keeping up to conns idle connections.
func NewClient(base string, sc Scenario, conns int) (*Client, error) {
	return newScenarioClient(base, sc, conns, false)
}

// NewIDsClient is [NewClient] for a client that asks for token ids and
// logprobs itself (return_token_ids and logprobs true, what orchard injects
// for vLLM), and expects the upstream's stream with them.
func NewIDsClient(base string, sc Scenario, conns int) (*Client, error) {
	return newScenarioClient(base, sc, conns, true)
}

func newScenarioClient(base string, sc Scenario, conns int, ids bool) (*Client, error) {
	sc.Defaults()
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	r, err := sc.render()
	if err != nil {
		return nil, err
	}
	return newClient(base, sc, sc.newRequests(), r, conns, ids), nil
}

// newClient shares already rendered requests and answers. A client that
// asks for ids (ids) sends and expects the ids variant.
func newClient(base string, sc Scenario, q *requests, r *rendered, conns int, ids bool) *Client {
	want := r.bodies[sc.variantOf(true, false, false)]
	if ids {
		q, want = q.askingIDs(), r.bodies[sc.variantOf(true, true, true)]
	}
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{
		hc:   &http.Client{Transport: tr},
		base: base,
		url:  base + "/v1/chat/completions",
		q:    q,
		want: want,
	}
}

// Close drops the idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Buffers are one goroutine's reusable request and response buffers.
type Buffers struct {
	req  []byte
	resp []byte
}

// Do sends turn k of episode, reads the whole stream and classifies it.
// start is when the request counts from (open loop: its due time).
func (c *Client) Do(ctx context.Context, b *Buffers, episode string, k int, start time.Time) Result {
	b.req = c.q.appendBody(b.req[:0], episode, k)
	res := Result{Start: start}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b.req))
	if err != nil {
		return res.fail(Transport, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orchard-bench/1")
	req.Header.Set("X-Orchard-Episode", episode)
	resp, err := c.hc.Do(req)
	if err != nil {
		return res.fail(c.errOutcome(ctx), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return res.fail(Status, fmt.Errorf("status %d: %s", resp.StatusCode, msg))
	}
	b.resp, err = readBody(resp.Body, b.resp[:0], &res)
	res.Total = time.Since(start)
	res.Bytes = len(b.resp)
	if err != nil {
		return res.fail(c.errOutcome(ctx), err)
	}
	want := c.want[min(k, len(c.want)-1)]
	if res.Outcome = Classify(b.resp, want); res.Outcome != OK {
		res.Err = fmt.Sprintf("turn %d: got %d bytes, want %d", k, len(b.resp), len(want))
	}
	return res
}

// Create starts an episode through orchard's episode API, as a rollout
// does before it runs its agent.
func (c *Client) Create(ctx context.Context, episode string) error {
	body, _ := json.Marshal(map[string]string{"id": episode})
	return c.episodeAPI(ctx, "/orchard/v1/episodes", body, http.StatusCreated)
}

// Finish ends an episode through orchard's episode API, as a rollout
// does once its agent is done: status success, reward 1.
func (c *Client) Finish(ctx context.Context, episode string) error {
	return c.episodeAPI(ctx, "/orchard/v1/episodes/"+url.PathEscape(episode)+"/finish",
		[]byte(`{"status":"success","reward":1}`), http.StatusOK)
}

func (c *Client) episodeAPI(ctx context.Context, path string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, msg)
	}
	return nil
}

func (c *Client) errOutcome(ctx context.Context) Outcome {
	if ctx.Err() != nil {
		return Timeout
	}
	return Transport
}

func (r Result) fail(o Outcome, err error) Result {
	r.Outcome, r.Err = o, err.Error()
	return r
}

// readBody appends the body to dst, noting the time of its first byte.
func readBody(body io.Reader, dst []byte, res *Result) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := body.Read(dst[len(dst):cap(dst)])
		if n > 0 && res.TTFB == 0 {
			res.TTFB = time.Since(res.Start)
		}
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
