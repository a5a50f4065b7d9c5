package assemble

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
)

// responses assembles a Responses API stream. The terminal event's response
// is the non-streaming body; without one (a cut stream) the latest snapshot is
// completed with the output items rebuilt from their events.
type responses struct {
	snapshot []byte
	terminal bool
	items    map[int64]*rItem
	errs     []string
	n        int
}

// rItem is one output item under construction.
type rItem struct {
	base    []byte            // item from output_item.added, or the final item
	done    bool              // base is output_item.done's complete item
	content map[int64][]byte  // content_index -> part
	summary map[int64][]byte  // summary_index -> part
	texts   map[string][]byte // "c<i>"/"s<i>"/"r<i>" -> accumulated text
	args    []byte
	hasArgs bool
}

func (r *responses) item(oi int64) *rItem {
	if r.items == nil {
		r.items = map[int64]*rItem{}
	}
	it := r.items[oi]
	if it == nil {
		it = &rItem{content: map[int64][]byte{}, summary: map[int64][]byte{}, texts: map[string][]byte{}}
		r.items[oi] = it
	}
	return it
}

func (r *responses) event(name string, data []byte) {
	r.n++
	if !gjson.ValidBytes(data) {
		r.errs = append(r.errs, "malformed event "+itoa(r.n))
		return
	}
	v := gjson.ParseBytes(data)
	typ := v.Get("type").String()
	if typ == "" {
		typ = name
	}
	it := func() *rItem { return r.item(v.Get("output_index").Int()) }
	idx := func(k string) string { return itoa64(v.Get(k).Int()) }
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		r.snap(v)
	case "response.completed", "response.failed", "response.incomplete":
		r.snap(v)
		r.terminal = true
		if e := v.Get("response.error.message"); e.Exists() {
			r.errs = append(r.errs, e.String())
		}
	case "error":
		r.errs = append(r.errs, errorMessage(v))
	case "response.output_item.added", "response.output_item.done":
		if item := v.Get("item"); item.IsObject() {
			x := it()
			x.base, x.done = []byte(item.Raw), typ == "response.output_item.done"
		}
	case "response.content_part.added":
		it().content[v.Get("content_index").Int()] = []byte(v.Get("part").Raw)
	case "response.reasoning_summary_part.added":
		it().summary[v.Get("summary_index").Int()] = []byte(v.Get("part").Raw)
	case "response.output_text.delta", "response.reasoning_text.delta":
		x := it()
		x.texts["c"+idx("content_index")] = append(x.texts["c"+idx("content_index")], v.Get("delta").String()...)
	case "response.refusal.delta":
		x := it()
		x.texts["r"+idx("content_index")] = append(x.texts["r"+idx("content_index")], v.Get("delta").String()...)
	case "response.reasoning_summary_text.delta":
		x := it()
		x.texts["s"+idx("summary_index")] = append(x.texts["s"+idx("summary_index")], v.Get("delta").String()...)
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		x := it()
		x.args, x.hasArgs = append(x.args, v.Get("delta").String()...), true
	}
}

func (r *responses) snap(v gjson.Result) {
	if resp := v.Get("response"); resp.IsObject() {
		r.snapshot = []byte(resp.Raw)
	}
}

func (r *responses) result() Result {
	res := Result{Done: r.terminal, Err: strings.Join(r.errs, "; ")}
	if r.snapshot == nil && len(r.items) == 0 {
		return res
	}
	var resp object
	gjson.ParseBytes(r.snapshot).ForEach(func(k, v gjson.Result) bool {
		resp.set(k.String(), []byte(v.Raw))
		return true
	})
	if !r.terminal {
		resp.set("output", r.output())
	}
	res.Response = resp.bytes()
	if m, ok := resp.get("model"); ok {
		res.Model = gjson.ParseBytes(m).String()
	}
	if u, ok := resp.get("usage"); ok && !isNull(u) {
		res.Usage = json.RawMessage(u)
	}
	return res
}

func (r *responses) output() []byte {
	idx := sortedKeys(r.items)
	out := make([][]byte, 0, len(idx))
	for _, i := range idx {
		if b := r.items[i].render(); b != nil {
			out = append(out, b)
		}
	}
	return rawArray(out)
}

// render rebuilds an unfinished item from its deltas.
func (x *rItem) render() []byte {
	if x.done || x.base == nil {
		return x.base
	}
	var o object
	gjson.ParseBytes(x.base).ForEach(func(k, v gjson.Result) bool {
		o.set(k.String(), []byte(v.Raw))
		return true
	})
	if len(x.content) > 0 {
		o.set("content", x.parts(x.content, "c", "text", "r"))
	}
	if len(x.summary) > 0 {
		o.set("summary", x.parts(x.summary, "s", "text", ""))
	}
	if x.hasArgs {
		o.set("arguments", quote(x.args))
	}
	return o.bytes()
}

// parts renders indexed parts with their accumulated text (and refusal).
func (x *rItem) parts(parts map[int64][]byte, prefix, key, refusal string) []byte {
	idx := sortedKeys(parts)
	out := make([][]byte, len(idx))
	for j, i := range idx {
		var p object
		gjson.ParseBytes(parts[i]).ForEach(func(k, v gjson.Result) bool {
			p.set(k.String(), []byte(v.Raw))
			return true
		})
		if t, ok := x.texts[prefix+itoa64(i)]; ok {
			p.set(key, quote(t))
		}
		if t, ok := x.texts[refusal+itoa64(i)]; ok && refusal != "" {
			p.set("refusal", quote(t))
		}
		out[j] = p.bytes()
	}
	return rawArray(out)
}

func (r *responses) started() bool { return r.snapshot != nil || len(r.items) > 0 }
