package assemble

import (
	"slices"

	"github.com/tidwall/gjson"
)

// textKeys are the message fields whose deltas are concatenated: content,
// vLLM's "reasoning" (named "reasoning_content" before vLLM PR 27752 and
// still in SGLang and DeepSeek), and OpenAI's refusal.
var textKeys = []string{"content", "reasoning", "reasoning_content", "refusal"}

// choice accumulates one choice of a chat or completions stream.
type choice struct {
	index  int64
	fields object // choice-level fields; "message"/"text"/"logprobs"/"token_ids" are placeholders
	msg    object // chat message fields; text keys are placeholders
	texts  map[string][]byte
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

func (ch *choice) add(v gjson.Result, chat bool) {
	var nIDs, nLP = -1, -1
	v.ForEach(func(k, f gjson.Result) bool {
		key := k.String()
		switch key {
		case "index":
		case "delta":
			ch.fields.set("message", nullJSON)
			ch.delta(f)
		case "text":
			if !chat && f.Type == gjson.String {
				ch.fields.set("text", nullJSON)
				ch.appendText("text", f.String())
			} else {
				ch.fields.merge(key, []byte(f.Raw))
			}
		case "logprobs":
			if !ch.fields.has(key) {
				ch.fields.set(key, nullJSON)
			}
			if f.IsObject() {
				nLP = ch.lp.add(f, chat)
			}
		case "token_ids":
			ch.fields.set(key, nullJSON)
			if ids, ok := int64s(f); ok {
				ch.ids.ids, ch.ids.seen = append(ch.ids.ids, ids...), true
				nIDs = len(ids)
			}
		case "prompt_token_ids":
			if ids, ok := int64s(f); ok && !ch.prompt.seen {
				ch.prompt = idList{ids, true}
			}
			ch.fields.merge(key, []byte(f.Raw))
		default:
			ch.fields.merge(key, []byte(f.Raw))
		}
		return true
	})
	if nIDs >= 0 && nLP >= 0 && nIDs != nLP && ch.mismatch == "" {
		ch.mismatch = "choice " + itoa64(ch.index) + ": a chunk has " + itoa(nIDs) +
			" token ids and " + itoa(nLP) + " logprobs"
	}
}

func (ch *choice) appendText(k, s string) {
	if ch.texts == nil {
		ch.texts = map[string][]byte{}
	}
	ch.texts[k] = append(ch.texts[k], s...)
}

func (ch *choice) delta(d gjson.Result) {
	d.ForEach(func(k, f gjson.Result) bool {
		key := k.String()
		switch {
		case slices.Contains(textKeys, key) && f.Type == gjson.String:
			ch.msg.set(key, nullJSON)
			ch.appendText(key, f.String())
		case slices.Contains(textKeys, key):
			if _, seen := ch.texts[key]; !seen {
				ch.msg.merge(key, []byte(f.Raw))
			}
		case key == "tool_calls" && f.IsArray():
			ch.msg.set(key, nullJSON)
			f.ForEach(func(_, tc gjson.Result) bool {
				ch.toolDelta(tc)
				return true
			})
		default:
			ch.msg.merge(key, []byte(f.Raw))
		}
		return true
	})
}

func (ch *choice) toolDelta(tc gjson.Result) {
	i := tc.Get("index").Int()
	if ch.tools == nil {
		ch.tools = map[int64]*toolCall{}
	}
	t := ch.tools[i]
	if t == nil {
		t = &toolCall{}
		ch.tools[i] = t
	}
	tc.ForEach(func(k, f gjson.Result) bool {
		switch key := k.String(); key {
		case "index":
		case "function":
			t.other.set("function", nullJSON)
			f.ForEach(func(fk, fv gjson.Result) bool {
				switch fk.String() {
				case "arguments":
					t.fn.set("arguments", nullJSON)
					t.args = append(t.args, fv.String()...)
				case "name":
					// The name arrives whole on the first delta; later
					// fragments (some servers split it) are appended.
					if fv.String() != "" {
						old, _ := t.fn.get("name")
						t.fn.set("name", quote(gjson.ParseBytes(old).String()+fv.String()))
					} else if !t.fn.has("name") {
						t.fn.set("name", []byte(fv.Raw))
					}
				default:
					t.fn.merge(fk.String(), []byte(fv.Raw))
				}
				return true
			})
		default:
			t.other.merge(key, []byte(f.Raw))
		}
		return true
	})
}

// render returns the choice as the non-streaming API shapes it.
func (ch *choice) render(chat bool) []byte {
	out := ch.fields
	if chat && out.has("message") {
		out.set("message", ch.message())
	}
	if s, ok := ch.texts["text"]; ok {
		out.set("text", quote(string(s)))
	}
	if out.has("logprobs") && ch.lp.seen {
		out.set("logprobs", ch.lp.render())
	}
	if out.has("token_ids") && ch.ids.seen {
		out.set("token_ids", intsJSON(ch.ids.ids))
	}
	return out.bytes()
}

func (ch *choice) message() []byte {
	m := ch.msg
	for k, s := range ch.texts {
		m.set(k, quote(string(s)))
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
			fn.set("arguments", quote(string(t.args)))
		}
		o.set("function", fn.bytes())
	}
	return o.bytes()
}
