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
func (x *exchange) patchRequest(m *reqMembers) {
	if !streamsTokens(x.api) {
		return
	}
	var p patch
	kind := x.kind.behaves()
	opts := m.get(memStreamOptions)
	if x.stream && !opts.Get("include_usage").Bool() {
		p.add(m, "stream_options.include_usage", memStreamOptions, `{"include_usage":true}`, true)
		x.strip.usage = true
		x.strip.nullUsage = kind == KindOpenAI
		x.strip.continuous = kind != KindSGLang && opts.Get("continuous_usage_stats").Bool()
		x.strip.usageNull = x.api == recorder.APICompletions
	}
	if kind.injectsTokens() {
		x.injectTokens(m, &p, kind)
	}
	body := p.apply(m)
	x.injected = p.paths
	x.commitPatch(body)
}

// injectTokens adds to p the token ids and logprobs the record needs.
func (x *exchange) injectTokens(m *reqMembers, p *patch, kind UpstreamKind) {
	chat := x.api == recorder.APIChatCompletions
	// SGLang refuses return_token_ids on streaming chat completions.
	if !m.get(memReturnTokenIDs).Bool() && !(kind == KindSGLang && chat && x.stream) {
		p.add(m, "return_token_ids", memReturnTokenIDs, "true", true)
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
	top, lp := m.get(memTopLogprobs), m.get(memLogprobs)
	if chat && !lp.Bool() && (!top.Exists() || top.Type == gjson.Null) {
		p.add(m, "logprobs", memLogprobs, "true", true)
		x.strip.fields = append(x.strip.fields, assemble.Unseen{Name: "logprobs", PerChoice: true})
	} else if !chat && (!lp.Exists() || lp.Type == gjson.Null) {
		p.add(m, "logprobs", memLogprobs, "1", 1)
		x.strip.fields = append(x.strip.fields, assemble.Unseen{Name: "logprobs", PerChoice: true})
	}
}

// patch is what the proxy sets in a request: by appending members in one
// copy of the body when none of them is there yet (the usual case), else
// by sjson, one path at a time.
type patch struct {
	paths []string
	vals  []any
	adds  []memberAdd
	slow  bool // a member is there already: set every path with sjson
}

// add sets path to v; key is path's top-level member, and raw is what
// appending it adds (its value with path's nested keys, if any).
func (p *patch) add(m *reqMembers, path string, key reqMember, raw string, v any) {
	p.paths = append(p.paths, path)
	p.vals = append(p.vals, v)
	p.adds = append(p.adds, memberAdd{key, raw})
	p.slow = p.slow || !m.appendable(key)
}

// apply returns the patched body and keeps in p.paths the paths it set.
func (p *patch) apply(m *reqMembers) sentBody {
	if len(p.paths) == 0 {
		return wholeBody(m.body)
	}
	if !p.slow {
		return m.withAppended(p.adds)
	}
	body, set := m.body, p.paths[:0]
	for i, path := range p.paths {
		// SetBytes allocates a new document (no ReplaceInPlace), so the
		// client's body stays as sent for the record.
		if b, err := sjson.SetBytes(body, path, p.vals[i]); err == nil {
			body = b
			set = append(set, path)
		}
	}
	p.paths = set
	return wholeBody(body)
}

func (x *exchange) commitPatch(body sentBody) {
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
