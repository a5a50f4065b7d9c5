package assemble_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// roundTrips lists, per API, requests whose streamed form must assemble into
// exactly the non-streaming response of the same script.
var roundTrips = []struct {
	name       string
	api        recorder.API
	path, body string
}{
	{"chat vllm text ids logprobs", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"text","messages":[{"role":"user","content":"capital?"}],"return_token_ids":true,"logprobs":true,"top_logprobs":2}`},
	{"chat vllm reasoning", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"reasoning","messages":[{"role":"user","content":"2+2"}],"return_token_ids":true}`},
	{"chat vllm parallel tools", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"tools","messages":[{"role":"user","content":"weather?"}],"return_token_ids":true,"logprobs":true}`},
	{"chat vllm tools turn 2", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"tools","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":"x"}],"return_token_ids":true}`},
	{"chat vllm no ids", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"tools","messages":[{"role":"user","content":"weather?"}]}`},
	{"chat vllm n=3", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"multi","n":3,"messages":[{"role":"user","content":"color?"}],"return_token_ids":true,"logprobs":true}`},
	{"chat openai parallel tools", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"openai-tools","messages":[{"role":"user","content":"weather?"}],"logprobs":true,"top_logprobs":1}`},
	{"chat sglang reasoning tools", recorder.APIChatCompletions, "/v1/chat/completions",
		`{"model":"sglang-tools","messages":[{"role":"user","content":"weather?"}]}`},
	{"completions vllm", recorder.APICompletions, "/v1/completions",
		`{"model":"text","prompt":"The capital of France","return_token_ids":true,"logprobs":2}`},
	{"completions vllm n=2", recorder.APICompletions, "/v1/completions",
		`{"model":"multi","prompt":"colors","n":2,"return_token_ids":true}`},
	{"completions openai", recorder.APICompletions, "/v1/completions",
		`{"model":"openai-tools","prompt":"x","logprobs":0}`},
	{"responses text", recorder.APIResponses, "/v1/responses",
		`{"model":"text","input":"capital?"}`},
	{"responses reasoning encrypted", recorder.APIResponses, "/v1/responses",
		`{"model":"reasoning","input":[{"role":"user","content":"2+2"}],"include":["reasoning.encrypted_content"],"instructions":"Be brief."}`},
	{"responses parallel tools", recorder.APIResponses, "/v1/responses",
		`{"model":"tools","input":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","name":"get_weather","parameters":{}}]}`},
	{"responses incomplete", recorder.APIResponses, "/v1/responses",
		`{"model":"text","input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`},
	{"messages text", recorder.APIMessages, "/v1/messages?beta=true",
		`{"model":"text","max_tokens":100,"messages":[{"role":"user","content":"capital?"}]}`},
	{"messages thinking", recorder.APIMessages, "/v1/messages",
		`{"model":"reasoning","max_tokens":100,"messages":[{"role":"user","content":"2+2"}]}`},
	{"messages parallel tools", recorder.APIMessages, "/v1/messages",
		`{"model":"tools","max_tokens":100,"messages":[{"role":"user","content":"weather?"}]}`},
	{"messages redacted", recorder.APIMessages, "/v1/messages",
		`{"model":"redacted","max_tokens":100,"messages":[{"role":"user","content":"x"}]}`},
}

func post(t *testing.T, srv *llmtest.Server, path, body string) []byte {
	t.Helper()
	resp, err := http.Post(srv.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %v %s", path, resp.StatusCode, err, b)
	}
	return b
}

// streamBody turns a non-streaming request body into its streaming twin.
func streamBody(api recorder.API, body string) string {
	if api == recorder.APIResponses || api == recorder.APIMessages {
		return strings.TrimSuffix(body, "}") + `,"stream":true}`
	}
	return strings.TrimSuffix(body, "}") + `,"stream":true,"stream_options":{"include_usage":true}}`
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestStreamEqualsJSON(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(llmtest.Options{})
	defer srv.Close()
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			want := post(t, srv, tc.path, tc.body)
			stream := post(t, srv, tc.path, streamBody(tc.api, tc.body))
			got := assemble.Stream(tc.api, stream)
			js := assemble.JSON(tc.api, want)
			if !got.Done || got.Err != "" || !js.Done || js.Err != "" {
				t.Fatalf("Done/Err: stream %v %q, json %v %q", got.Done, got.Err, js.Done, js.Err)
			}
			if !jsonEqual(t, got.Response, want) {
				t.Errorf("Stream(%s) response =\n%s\nwant\n%s", tc.api, got.Response, want)
			}
			if !jsonEqual(t, got.Usage, js.Usage) || got.Model != js.Model {
				t.Errorf("usage/model = %s %q, want %s %q", got.Usage, got.Model, js.Usage, js.Model)
			}
			if !reflect.DeepEqual(got.Tokens, js.Tokens) {
				t.Errorf("tokens =\n%+v\nwant\n%+v", got.Tokens, js.Tokens)
			}
			if js.Tokens != nil && js.Tokens.Mismatch != "" {
				t.Errorf("mismatch %q", js.Tokens.Mismatch)
			}
			if bytes.Contains([]byte(tc.body), []byte("return_token_ids")) && !strings.Contains(tc.name, "openai") &&
				!strings.Contains(tc.name, "sglang") && (js.Tokens == nil || len(js.Tokens.CompletionIDs) == 0) {
				t.Errorf("no token ids recorded")
			}
		})
	}
}

// TestStreamerPieces feeds every round-trip stream to a Streamer in pieces
// (one byte at a time, and cut at seeded random points, which splits events,
// lines and "\r\n" pairs): the result must equal Stream's on the whole body.
func TestStreamerPieces(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(llmtest.Options{})
	defer srv.Close()
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			stream := post(t, srv, tc.path, streamBody(tc.api, tc.body))
			crlf := bytes.ReplaceAll(stream, []byte("\n"), []byte("\r\n"))
			for _, body := range [][]byte{stream, crlf, append([]byte("\xEF\xBB\xBF"), stream...)} {
				want := assemble.Stream(tc.api, body)
				for seed := range 4 {
					got := feedPieces(t, tc.api, body, seed)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("seed %d: pieces gave\n%+v\nwhole body gave\n%+v", seed, got, want)
					}
				}
			}
		})
	}
}

// feedPieces writes body to a new Streamer one byte at a time (seed 0) or in
// pseudo-random pieces of 1-64 bytes.
func feedPieces(t *testing.T, api recorder.API, body []byte, seed int) assemble.Result {
	t.Helper()
	s, err := assemble.NewStreamer(api)
	if err != nil {
		t.Fatal(err)
	}
	x := uint32(seed*2654435761 + 1)
	for len(body) > 0 {
		n := 1
		if seed > 0 {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			n = 1 + int(x%64)
		}
		n = min(n, len(body))
		s.Write(body[:n])
		body = body[n:]
	}
	return s.Result()
}

// TestStreamersRecycled assembles the round-trip streams on four
// goroutines at once, over and over, each stream by a new Streamer fed in
// pieces: finished streams hand their templates and framers to later ones,
// and no stream may see another's state (the race detector watches the
// sharing). Each result must equal the stream's on its own, in a fresh
// process state.
func TestStreamersRecycled(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(llmtest.Options{})
	defer srv.Close()
	type stream struct {
		api  recorder.API
		body []byte
		want assemble.Result
	}
	var streams []stream
	for _, tc := range roundTrips {
		body := post(t, srv, tc.path, streamBody(tc.api, tc.body))
		streams = append(streams, stream{tc.api, body, assemble.Stream(tc.api, body)})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 6 * len(streams) {
				s := streams[(i*7+g*5)%len(streams)]
				if got := feedPieces(t, s.api, s.body, 1+(i+g)%4); !reflect.DeepEqual(got, s.want) {
					errs <- fmt.Sprintf("goroutine %d, stream %d (%s):\n%+v\nwant\n%+v", g, i, s.api, got, s.want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
