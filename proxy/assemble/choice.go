package assemble

import (
	"bytes"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonout"
)

// textKeys are the message fields whose deltas are concatenated: content,
// vLLM's "reasoning" (named "reasoning_content" before vLLM PR 27752 and
// still in SGLang and DeepSeek), and OpenAI's refusal.
var textKeys = []string{"content", "reasoning", "reasoning_content", "refusal"}

// choice accumulates one choice of a chat or completions stream.
type choice struct {
	c      *choices
	index  int64
	fields object // choice-level fields; "message"/"text"/"logprobs"/"token_ids" are placeholders
	msg    object // chat message fields; text keys are placeholders
	texts  texts
	tools  map[int64]*toolCall
	lp     logprobs
	ids    idList
	prompt idList
	// mismatch notes chunks whose token_ids and logprob entries disagree.
	mismatch string
}

// toolCall accumulates one tool call of a chat choice by its index.
type toolCall struct {
	other, fn object
	args      []byte
}

func (ch *choice) add(v val, chat bool) {
	var nIDs, nLP = -1, -1
	v.ForEach(func(k, f val) bool {
		switch k.text() {
		case "index":
		case "delta":
			ch.fields.put("message", nullJSON)
			ch.delta(f)
		case "text":
			if !chat && f.Type == gjson.String {
				ch.c.note(holeCompletion, f, ch, "", nil)
				ch.completionText(f)
			} else {
				ch.fields.mergeRaw(k, f.raw)
			}
		case "logprobs":
			if !ch.fields.has("logprobs") {
				ch.fields.set("logprobs", nullJSON)
			}
			if f.IsObject() {
				ch.c.note(holeLogprobs, f, ch, "", nil)
				nLP = ch.lp.add(f, chat)
			}
		case "token_ids":
			if f.IsArray() {
				ch.c.note(holeIDs, f, ch, "", nil)
			}
			nIDs = ch.addIDs(f)
		case "prompt_token_ids":
			if ids, ok := tokenIDs(f); ok && !ch.prompt.seen {
				ch.prompt = idList{ids, true}
			}
			if ch.c.unseen.has("prompt_token_ids", true) {
				ch.fields.put("prompt_token_ids", nullJSON)
			} else {
				ch.fields.mergeRaw(k, f.raw)
			}
		default:
			ch.fields.mergeRaw(k, f.raw)
		}
		return true
	})
	ch.checkCounts(nIDs, nLP)
}

// The members of a chunk whose values are appended to the choice: the
// template replays them (see template.go), so each is one method.

func (ch *choice) completionText(f val) {
	if !ch.texts.add("text", f) {
		ch.fields.put("text", nullJSON)
	}
}

// addIDs appends a chunk's token_ids and returns how many there were (-1
// when the value is not a list of ids).
func (ch *choice) addIDs(f val) int {
	ch.fields.put("token_ids", nullJSON)
	return ch.moreIDs(f)
}

// moreIDs is addIDs for a chunk replayed through a template: the parse of
// the template chunk put the placeholder, and only a parse changes it.
func (ch *choice) moreIDs(f val) int {
	ids, n, ok := appendIDs(ch.ids.ids, f)
	if !ok {
		return -1
	}
	ch.ids.ids, ch.ids.seen = ids, true
	return n
}

func (ch *choice) deltaText(key string, f val) {
	if !ch.texts.add(key, f) {
		ch.msg.put(key, nullJSON)
	}
}

func (t *toolCall) addArgs(f val) {
	t.fn.put("arguments", nullJSON)
	t.args = f.appendString(t.args)
}

// checkCounts notes the first chunk whose token ids and logprob entries
// disagree in number (-1: the chunk had none).
func (ch *choice) checkCounts(nIDs, nLP int) {
	if nIDs >= 0 && nLP >= 0 && nIDs != nLP && ch.mismatch == "" {
		ch.mismatch = "choice " + itoa64(ch.index) + ": a chunk has " + itoa(nIDs) +
			" token ids and " + itoa(nLP) + " logprobs"
	}
}

// texts are a choice's concatenated text fields, in the order their keys
// first came. A choice has one or two (a handful of keys exist): a list
// is searched faster than a map is hashed, once per chunk.
type texts []textField

type textField struct {
	key string
	b   []byte
}

// add appends the string value s's text to the field k and reports
// whether k was there before.
func (t *texts) add(k string, s val) bool {
	for i := range *t {
		if f := &(*t)[i]; f.key == k {
			f.b = s.appendString(f.b)
			return true
		}
	}
	*t = append(*t, textField{key: k, b: s.appendString(nil)})
	return false
}

// get returns the text of field k and whether it is there.
func (t texts) get(k string) ([]byte, bool) {
	for _, f := range t {
		if f.key == k {
			return f.b, true
		}
	}
	return nil, false
}

// textKey returns the text key k names ("" if none), as a constant string
// so that the maps keyed by it do not keep a copy of the chunk.
func textKey(k val) string {
	kt := k.text()
	for _, t := range textKeys {
		if kt == t {
			return t
		}
	}
	return ""
}

func (ch *choice) delta(d val) {
	d.ForEach(func(k, f val) bool {
		switch key := textKey(k); {
		case key != "" && f.Type == gjson.String:
			ch.c.note(holeText, f, ch, key, nil)
			ch.deltaText(key, f)
		case key != "":
			if _, seen := ch.texts.get(key); !seen {
				ch.msg.mergeRaw(k, f.raw)
			}
		case k.text() == "tool_calls" && f.IsArray():
			ch.msg.put("tool_calls", nullJSON)
			f.ForEach(func(_, tc val) bool {
				ch.toolDelta(tc)
				return true
			})
		default:
			ch.msg.mergeRaw(k, f.raw)
		}
		return true
	})
}

func (ch *choice) toolDelta(tc val) {
	i := tc.Get("index").Int()
	if ch.tools == nil {
		ch.tools = map[int64]*toolCall{}
	}
	t := ch.tools[i]
	if t == nil {
		t = &toolCall{}
		ch.tools[i] = t
	}
	tc.ForEach(func(k, f val) bool {
		switch k.text() {
		case "index":
		case "function":
			t.other.put("function", nullJSON)
			f.ForEach(func(fk, fv val) bool {
				switch fk.text() {
				case "arguments":
					ch.c.note(holeArgs, fv, ch, "", t)
					t.addArgs(fv)
				case "name":
					// The name arrives whole on the first delta; later
					// fragments (some servers split it) are appended.
					if name := fv.String(); name != "" {
						ch.c.noTemplate() // appends: not a pure function of the chunk
						old, _ := t.fn.get("name")
						t.fn.set("name", quote(gjson.ParseBytes(old).String()+name))
					} else if !t.fn.has("name") {
						t.fn.set("name", bytes.Clone(fv.raw))
					}
				default:
					t.fn.mergeRaw(fk, fv.raw)
				}
				return true
			})
		default:
			t.other.mergeRaw(k, f.raw)
		}
		return true
	})
}

// prepare starts rendering the choice as the non-streaming API shapes it:
// it sets the choice's small assembled fields (message, text) and
// reports whether its logprobs and token ids are to be rendered from the
// accumulated lists.
func (ch *choice) prepare(chat bool) (out object, lp, ids bool) {
	out = ch.fields
	if chat && out.has("message") {
		out.set("message", ch.message())
	}
	if s, ok := ch.texts.get("text"); ok {
		out.set("text", quote(s))
	}
	u := ch.c.unseen
	u.apply(&out, true)
	lp = out.has("logprobs") && ch.lp.seen && !ch.lp.valuesOnly
	ids = out.has("token_ids") && ch.ids.seen && !u.has("token_ids", true)
	return out, lp, ids
}

// size is about the length of the prepared choice rendered.
func (ch *choice) size(out *object, lp, ids bool) int {
	n := out.size()
	if lp {
		n += ch.lp.size()
	}
	if ids {
		n += 8 * len(ch.ids.ids)
	}
	return n
}

// appendTo appends the prepared choice to b, writing the logprobs and token
// ids straight from their lists.
func (ch *choice) appendTo(b []byte, out *object, lp, ids bool) []byte {
	return out.appendTo(b, func(b []byte, k string) ([]byte, bool) {
		switch {
		case k == "logprobs" && lp:
			return ch.lp.appendTo(b), true
		case k == "token_ids" && ids:
			return jsonout.Int32s(b, ch.ids.ids), true
		}
		return b, false
	})
}

func (ch *choice) message() []byte {
	m := ch.msg
	for _, f := range ch.texts {
		m.set(f.key, quote(f.b))
	}
	if m.has("tool_calls") {
		idx := make([]int64, 0, len(ch.tools))
		for i := range ch.tools {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		calls := make([][]byte, len(idx))
		for j, i := range idx {
			calls[j] = ch.tools[i].render()
		}
		m.set("tool_calls", rawArray(calls))
		// Non-streaming responses carry content null beside tool calls where
		// the stream opened with an empty content delta.
		if c, ok := m.get("content"); ok && string(c) == `""` {
			m.set("content", nullJSON)
		}
	}
	return m.bytes()
}

func (t *toolCall) render() []byte {
	o := t.other
	if o.has("function") {
		fn := t.fn
		if fn.has("arguments") {
			fn.set("arguments", quote(t.args))
		}
		o.set("function", fn.bytes())
	}
	return o.bytes()
}
