package proxy

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/internal/loadgen"
	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// BenchmarkStripAssemble measures the vLLM token path's per-chunk work on
// the proxy: stripping the injected ids and logprobs from each chunk and
// feeding it to the assembler, for a stream of n token chunks.
func BenchmarkStripAssemble(b *testing.B) {
	rules := stripRules{fields: []assemble.Unseen{{Name: "prompt_token_ids"}, {Name: "token_ids", PerChoice: true}, {Name: "logprobs", PerChoice: true}}}
	for _, n := range []int{100, 1000} {
		benchStripAssemble(b, rules, fmt.Sprintf("chunks=%d", n), topLogprobsStream(n))
	}
	// The load benchmark's chunks: reasoning then content, one logprobs
	// entry per token without alternatives.
	benchStripAssemble(b, rules, "load", loadStream(275))
	// A server that streams eight tokens a chunk (as SGLang does with
	// --stream-interval 8), each with five alternatives: 8 logprobs entries of 18 values.
	benchStripAssemble(b, rules, "interval=8", intervalStream(100, 8, 5))
	// An agent's long prompt: the first chunk carries 30,000 prompt ids.
	benchStripAssemble(b, rules, "prompt=30000", promptStream(30000))
	// The load benchmark's own streams: the eight turns of an episode as
	// its upstream sends them on the token path (usage, ids, logprobs),
	// one after the other; per-stream figures are an eighth of these.
	bodies := scenarioBodies(b)
	b.Run("episode", func(b *testing.B) {
		b.SetBytes(int64(len(bytes.Join(bodies, nil))))
		b.ReportAllocs()
		for b.Loop() {
			for _, raw := range bodies {
				stripAssembleOnce(b, rules, raw)
			}
		}
	})
}

// scenarioBodies renders the load benchmark's episode on the token path.
func scenarioBodies(tb testing.TB) [][]byte {
	var sc loadgen.Scenario
	sc.Defaults()
	bodies, err := sc.Bodies(true, true, true)
	if err != nil {
		tb.Fatal(err)
	}
	return bodies
}

// promptStream is the first chunk of a vLLM chat stream whose prompt had n
// tokens, then [DONE].
func promptStream(n int) []byte {
	var body bytes.Buffer
	body.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[`)
	for i := range n {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprint(&body, 1000+i*7919%150000)
	}
	body.WriteString("]}\n\ndata: [DONE]\n\n")
	return body.Bytes()
}

// topLogprobsStream is a chat stream of n token chunks, each with two
// top_logprobs alternatives.
func topLogprobsStream(n int) []byte {
	var body bytes.Buffer
	body.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,2,3]}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&body, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"content":" tok%d"},"logprobs":{"content":[{"token":" tok%d","logprob":-0.%d,"bytes":[32,116,111,107],"top_logprobs":[{"token":" tok%d","logprob":-0.%d,"bytes":[32,116,111,107]},{"token":" a","logprob":-3.%d,"bytes":[32,97]}]}]},"finish_reason":null,"token_ids":[%d]}]}`+"\n\n", i, i, i+1, i, i+1, i+7, 1000+i)
	}
	body.WriteString("data: [DONE]\n\n")
	return body.Bytes()
}

// intervalStream is a chat stream of n chunks of k tokens each, every
// token's logprobs entry with top alternatives.
func intervalStream(n, k, top int) []byte {
	var body bytes.Buffer
	body.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,2,3]}` + "\n\n")
	for i := range n {
		var text, entries, ids []string
		for j := range k {
			tok := fmt.Sprintf(" t%d", i*k+j)
			text = append(text, tok)
			ids = append(ids, fmt.Sprint(1000+i*k+j))
			var alts []string
			for a := range top {
				alts = append(alts, fmt.Sprintf(`{"token":"%s%d","logprob":-%d.%d,"bytes":[32,116]}`, tok, a, a, j+1))
			}
			entries = append(entries, fmt.Sprintf(`{"token":"%s","logprob":-0.%d,"bytes":[32,116],"top_logprobs":[%s]}`, tok, j+1, strings.Join(alts, ",")))
		}
		fmt.Fprintf(&body, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"qwen","choices":[{"index":0,"delta":{"content":%q},"logprobs":{"content":[%s]},"finish_reason":null,"token_ids":[%s]}]}`+"\n\n",
			strings.Join(text, ""), strings.Join(entries, ","), strings.Join(ids, ","))
	}
	body.WriteString("data: [DONE]\n\n")
	return body.Bytes()
}

func benchStripAssemble(b *testing.B, rules stripRules, name string, raw []byte) {
	b.Run(name, func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			stripAssembleOnce(b, rules, raw)
		}
	})
}

// stripAssembleOnce strips and assembles one stream, read 4 KiB at a time.
func stripAssembleOnce(b *testing.B, rules stripRules, raw []byte) {
	asm, _ := assemble.NewStreamer(recorder.APIChatCompletions)
	asm.Hide(rules.fields) // as the proxy does
	s := newStripper(io.NopCloser(&chunkReader{b: raw, n: 4096}), rules, asm)
	io.Copy(io.Discard, s)
	s.Close()
	if r := asm.Result(); !r.Done {
		b.Fatal("not done")
	}
}

// loadStream is a chat stream shaped like the load benchmark's upstream
// (orchard-bench): n token chunks, the first third reasoning, each with
// one logprobs entry and no alternatives.
func loadStream(n int) []byte {
	var body bytes.Buffer
	body.WriteString(`data: {"id":"chatcmpl-llmtest-bench-0","object":"chat.completion.chunk","created":1767225600,"model":"bench","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1000,1001,1002,1003,1004,1005,1006,1007]}` + "\n\n")
	for i := range n {
		key := "content"
		if i < n/3 {
			key = "reasoning"
		}
		fmt.Fprintf(&body, `data: {"id":"chatcmpl-llmtest-bench-0","object":"chat.completion.chunk","created":1767225600,"model":"bench","choices":[{"index":0,"delta":{%q:"w%03d"},"logprobs":{"content":[{"token":"w%03d","logprob":-0.%d,"bytes":[119,48,48,48],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[%d]}]}`+"\n\n", key, i%1000, i%1000, i+1, 20000+i)
	}
	body.WriteString("data: [DONE]\n\n")
	return body.Bytes()
}

type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

// TestDataJSONEnd holds dataJSON's line end (the first CR or LF after the
// object's start) to a search of both over the whole rest of the event,
// with and without the first line's end that the framer tells.
func TestDataJSONEnd(t *testing.T) {
	for _, ev := range []string{
		"data: {}", "data: {}\n\n", "data: {}\r\n\r\n", "data: {}\r", "data: {}\rx\n",
		"data: {}\nx\r\n", "data: {\"a\":1}\n\n", "id: 1\ndata:{}\r\n\r\n", "data: {}x\n\n", "data: {\r}\n",
	} {
		b := []byte(ev)
		start, end := dataJSON(b, -1)
		if fs, fe := dataJSON(b, bytes.IndexAny(b, "\r\n")); fs != start || fe != end {
			t.Errorf("%q: with the framer's line end %d %d, without %d %d", ev, fs, fe, start, end)
		}
		wantStart, wantEnd := -1, -1
		if i := bytes.Index(b, []byte("data:")); i >= 0 {
			s := i + 5
			for s < len(b) && b[s] == ' ' {
				s++
			}
			e := len(b)
			if k := bytes.IndexAny(b[s:], "\r\n"); k >= 0 {
				e = s + k
			}
			if s < len(b) && b[s] == '{' && b[e-1] == '}' {
				wantStart, wantEnd = s, e
			}
		}
		if start != wantStart || end != wantEnd {
			t.Errorf("%q: %d %d, want %d %d", ev, start, end, wantStart, wantEnd)
		}
	}
}
