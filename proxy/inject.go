package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/orchard-rl/orchard/proxy/assemble"
	"github.com/orchard-rl/orchard/recorder"
)

// patchRequest asks the upstream for what the record needs and the client
// did not ask for (usage in streams; token ids and logprobs from vLLM and
// SGLang), and notes what to strip from the response so the client sees
// exactly what it would have seen without the proxy. A field the client set
// itself is left alone, and so is its answer.
func (x *exchange) patchRequest() {
	if !streamsTokens(x.api) || !x.reqJSON {
		return
	}
	body := x.reqBody
	set := func(path string, v any) {
		// SetBytes allocates a new document (no ReplaceInPlace), so the
		// client's body stays as sent for the record.
		if b, err := sjson.SetBytes(body, path, v); err == nil {
			body = b
			x.injected = append(x.injected, path)
		}
	}
	kind := x.kind.behaves()
	if x.stream && !gjson.GetBytes(body, "stream_options.include_usage").Bool() {
		set("stream_options.include_usage", true)
		x.strip.usage = true
		x.strip.nullUsage = kind == KindOpenAI
		x.strip.continuous = kind != KindSGLang && gjson.GetBytes(body, "stream_options.continuous_usage_stats").Bool()
		x.strip.usageNull = x.api == recorder.APICompletions
	}
	if !kind.injectsTokens() {
		x.commitPatch(body)
		return
	}
	chat := x.api == recorder.APIChatCompletions
	// SGLang refuses return_token_ids on streaming chat completions.
	if !gjson.GetBytes(body, "return_token_ids").Bool() && !(kind == KindSGLang && chat && x.stream) {
		set("return_token_ids", true)
		if kind == KindVLLM {
			x.strip.fields = append(x.strip.fields,
				assemble.Unseen{Name: "prompt_token_ids", PerChoice: !chat},
				assemble.Unseen{Name: "token_ids", PerChoice: true})
		} else {
			x.strip.fields = append(x.strip.fields,
				assemble.Unseen{Name: "prompt_token_ids", PerChoice: true, Remove: chat},
				assemble.Unseen{Name: "token_ids", PerChoice: true, Remove: chat})
		}
	}
	// vLLM refuses top_logprobs without logprobs: true (check_logprobs in
	// its protocol); injecting logprobs would turn that refusal into an
	// answer, so such a request goes as sent.
	top := gjson.GetBytes(body, "top_logprobs")
	if lp := gjson.GetBytes(body, "logprobs"); chat && !lp.Bool() && (!top.Exists() || top.Type == gjson.Null) {
		set("logprobs", true)
		x.strip.fields = append(x.strip.fields, assemble.Unseen{Name: "logprobs", PerChoice: true})
	} else if !chat && (!lp.Exists() || lp.Type == gjson.Null) {
		set("logprobs", 1)
		x.strip.fields = append(x.strip.fields, assemble.Unseen{Name: "logprobs", PerChoice: true})
	}
	x.commitPatch(body)
}

func (x *exchange) commitPatch(body []byte) {
	if len(x.injected) > 0 {
		x.sent, x.patched = body, true
	}
}

// stripWhole strips injected fields from a non-streaming JSON answer. It
// reads the whole body through the tee (so the record's tokens come from
// the upstream's bytes), fixes Content-Length and returns what the client
// gets, or nil when the body could not be read whole.
func stripWhole(res *http.Response, body io.ReadCloser, r stripRules) []byte {
	full, err := io.ReadAll(body)
	if err != nil {
		// Pass on what came and then the error, as an unstripped stream would.
		res.Body = readCloser{io.MultiReader(bytes.NewReader(full), errReader{err}), body}
		return nil
	}
	out, _ := r.rewrite(full, false)
	res.Body = readCloser{bytes.NewReader(out), body}
	res.ContentLength = int64(len(out))
	res.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return out
}

type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
