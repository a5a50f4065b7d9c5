package assemble

import (
	"bytes"

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
	if cap(ch.ids.ids) == 0 {
		ch.ids.ids = idLists.get(idRoom)
	}
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
	t.args = f.appendString(roomFor(t.args, f))
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
			f.b = s.appendString(roomFor(f.b, s))
			return true
		}
	}
	*t = append(*t, textField{key: k, b: s.appendString(roomFor(nil, s))})
	return false
}

// textRoom is the room a new buffer gives a text (see listPool).
const textRoom = 256

// roomFor is dst with room for a stream's text when it has none yet and the
// string s adds to it.
func roomFor(dst []byte, s val) []byte {
	if len(s.raw) > 2 && cap(dst) == 0 { // more than ""
		return textLists.get(textRoom)
	}
	return dst
}

// recycle gives the texts' buffers to later streams, once the response
// holds them; the texts are empty after.
func (t texts) recycle() {
	for i := range t {
		textLists.put(t[i].b)
		t[i].b = nil
	}
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

// prepared is a choice ready to be rendered: its fields, and which of
// them are written straight from what was accumulated.
type prepared struct {
	out     object
	lp, ids bool
	msg     bool // the message: appendMessage
}

// prepare starts rendering the choice as the non-streaming API shapes it:
// it sets the choice's small assembled fields (text) and reports whether
// its message, logprobs and token ids are to be rendered from what was
// accumulated.
func (ch *choice) prepare(chat bool) prepared {
	p := prepared{out: ch.fields}
	if p.msg = chat && p.out.has("message"); p.msg {
		// A text's first delta gave it its place among the message's
		// fields; one without gets its place after them.
		for _, f := range ch.texts {
			if !ch.msg.has(f.key) {
				ch.msg.set(f.key, nullJSON)
			}
		}
	}
	if s, ok := ch.texts.get("text"); ok {
		p.out.set("text", quote(s))
	}
	u := ch.c.unseen
	u.apply(&p.out, true) // an unseen message is null or gone, as the client saw it
	p.msg = p.msg && !u.has("message", true)
	p.lp = p.out.has("logprobs") && ch.lp.seen && !ch.lp.valuesOnly
	p.ids = p.out.has("token_ids") && ch.ids.seen && !u.has("token_ids", true)
	return p
}

// size is about the length of the prepared choice rendered.
func (ch *choice) size(p *prepared) int {
	n := p.out.size()
	if p.msg {
		n += ch.messageSize()
	}
	if p.lp {
		n += ch.lp.size()
	}
	if p.ids {
		n += 8 * len(ch.ids.ids)
	}
	return n
}

// appendTo appends the prepared choice to b, writing the message, logprobs
// and token ids straight from what was accumulated.
func (ch *choice) appendTo(b []byte, p *prepared) []byte {
	return p.out.appendTo(b, func(b []byte, k string) ([]byte, bool) {
		switch {
		case k == "message" && p.msg:
			return ch.appendMessage(b), true
		case k == "logprobs" && p.lp:
			return ch.lp.appendTo(b), true
		case k == "token_ids" && p.ids:
			return jsonout.Int32s(b, ch.ids.ids), true
		}
		return b, false
	})
}

// appendMessage appends the message to b: its fields in the order they
// came, the texts quoted and the tool calls (in index order) rendered in
// place, not each into a buffer of its own and copied. Non-streaming
// responses carry content null beside tool calls where the stream opened
// with an empty content delta.
func (ch *choice) appendMessage(b []byte) []byte {
	tools := ch.msg.has("tool_calls")
	return ch.msg.appendTo(b, func(b []byte, k string) ([]byte, bool) {
		t, text := ch.texts.get(k)
		switch {
		case k == "content" && tools && text && len(t) == 0:
			return append(b, "null"...), true
		case text:
			return jsonout.String(b, t), true
		case k == "tool_calls" && tools:
			b = append(b, '[')
			for j, i := range ch.toolOrder() {
				if j > 0 {
					b = append(b, ',')
				}
				b = ch.tools[i].appendTo(b)
			}
			return append(b, ']'), true
		}
		return b, false
	})
}

// messageSize is about the length of the message appendMessage writes.
func (ch *choice) messageSize() int {
	n := ch.msg.size()
	for _, f := range ch.texts {
		n += len(f.b)
	}
	for _, t := range ch.tools {
		n += t.other.size() + t.fn.size() + len(t.args) + 1
	}
	return n
}

// toolOrder returns the indexes of the tool calls, in order.
func (ch *choice) toolOrder() []int64 { return sortedKeys(ch.tools) }

// appendTo appends the tool call to b, its arguments quoted in place.
func (t *toolCall) appendTo(b []byte) []byte {
	if !t.other.has("function") {
		return t.other.appendTo(b, nil)
	}
	return t.other.appendTo(b, func(b []byte, k string) ([]byte, bool) {
		if k != "function" {
			return b, false
		}
		return t.fn.appendTo(b, func(b []byte, k string) ([]byte, bool) {
			if k != "arguments" {
				return b, false
			}
			return jsonout.String(b, t.args), true
		}), true
	})
}
