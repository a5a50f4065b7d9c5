package assemble

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// choices assembles chat.completion.chunk and text_completion streams: both
// carry a list of choices, keyed by "index", whose deltas are concatenated.
type choices struct {
	chat    bool
	top     object
	byIndex map[int64]*choice
	usage   []byte
	done    bool
	errs    []string
	prompt  idList // top-level prompt_token_ids (vLLM chat)
	unseen  unseen // members the client never saw (Streamer.Hide)
	sglIn   idList // sglext.input_ids (SGLang)
	sglOut  map[int64][]int32
	nChunks int
	tpl     *template
	final   *Result           // the assembled response, once built
	cur     []byte            // the chunk being parsed in full (for template offsets)
	members []jsonscan.Member // scratch: the members of the chunk being parsed
	// membersRoom backs members until a chunk has more: a chat chunk has
	// six or seven, which appending from nil allocated four times a stream.
	membersRoom [8]jsonscan.Member
	group       int // choice objects seen in the chunk being parsed
	// promptRead: the top-level prompt_token_ids that validating the chunk
	// being parsed read (see readPrompt), at promptAt in it; -1: none.
	promptRead []int32
	promptAt   int
	// validated: the last chunk, when it was found a strictly valid
	// object, whose members are then c.members (see
	// Streamer.EventMembers); compared by address only.
	validated []byte
}

// idList is a list of token ids and whether the upstream sent it at all.
type idList struct {
	ids  []int32
	seen bool
}

func newChoices(chat bool) *choices {
	c := &choices{chat: chat, byIndex: map[int64]*choice{}, sglOut: map[int64][]int32{}, tpl: newTemplate()}
	c.members = c.membersRoom[:0]
	return c
}

// replayStripped is template.replayStripped for the next chunk.
func (c *choices) replayStripped(dst, data []byte) ([]byte, bool) {
	out, ok := c.tpl.replayStripped(dst, data)
	if ok {
		c.nChunks++
	}
	return out, ok
}

func (c *choices) event(_ string, data []byte) {
	if string(data) == "[DONE]" {
		c.done = true
		return
	}
	c.nChunks++
	c.validated = nil // c.members are about to be another chunk's
	if c.tpl.replay(data) {
		return
	}
	c.tpl.reset()
	c.cur, c.promptAt = data, -1
	c.parse(data)
	c.cur = nil
}

// parse merges a chunk that did not replay through the template, c.cur.
func (c *choices) parse(data []byte) {
	// A strictly valid object's members are found as it is validated; the
	// rest (what only gjson's leniency accepts) is walked by ForEach.
	members, strict := jsonscan.ValidMembersWith(data, c.members[:0], c.readPrompt)
	c.members = members
	if !strict {
		c.promptAt = -1
	} else {
		c.validated = data
	}
	if !strict && !gjson.ValidBytes(data) {
		c.errs = append(c.errs, "malformed chunk "+itoa(c.nChunks))
		return
	}
	// Every chunk passes here: look for an error object only in the rare
	// chunk that mentions one, instead of three lookups per chunk.
	if mayBeError(data) {
		if e := errorMessage(gjson.ParseBytes(data)); e != "" {
			c.errs = append(c.errs, e)
			return
		}
	}
	// Only strictly valid JSON (not what only gjson's leniency accepts)
	// becomes a template: its exactness argument assumes a valid document.
	c.group, c.tpl.ok = 0, strict
	if strict {
		for _, m := range members {
			k, v := data[m.Key.Start:m.Key.End], data[m.Value.Start:m.Value.End]
			c.topField(val{raw: k, Type: gjson.String}, val{raw: v, Type: jsonscan.TypeOf(v[0])})
		}
	} else {
		valOf(data).ForEach(func(k, v val) bool {
			c.topField(k, v)
			return true
		})
	}
	if c.tpl.ok {
		c.tpl.keep(data)
	}
}

// topField merges one top-level member of a chunk. Keys and values alias
// the chunk: object.mergeRaw copies what it keeps.
func (c *choices) topField(k, v val) {
	switch k.text() {
	case "choices":
		c.top.put("choices", nullJSON) // filled by result
		v.ForEach(func(_, ch val) bool {
			c.group++
			c.choice(ch.Get("index").Int()).add(ch, c.chat)
			return true
		})
	case "object":
		if c.chat && v.is("chat.completion.chunk") {
			c.top.put("object", chatCompletion)
		} else {
			c.top.mergeRaw(k, v.raw)
		}
	case "usage":
		if v.Type != gjson.Null {
			c.usage = bytes.Clone(v.raw)
		}
		c.top.mergeRaw(k, v.raw)
	case "prompt_token_ids":
		if ids, ok := c.promptIDs(v); ok && !c.prompt.seen {
			c.prompt = idList{ids, true}
			// The chunk that brings the prompt's ids (vLLM's first) is
			// not repeated: kept as the template, its copy (kilobytes of
			// ids) would stay allocated for the stream's life in the
			// template's buffer, which the next chunk reuses.
			c.noTemplate()
		}
		if c.unseen.has("prompt_token_ids", false) {
			c.top.put("prompt_token_ids", nullJSON) // shown as the client saw it by result
		} else {
			c.top.mergeRaw(k, v.raw)
		}
	case "sglext":
		c.noTemplate() // appends output ids
		c.sglext(v)
		c.top.mergeRaw(k, v.raw)
	default:
		c.top.mergeRaw(k, v.raw)
	}
}

var chatCompletion = quote("chat.completion")

// readPrompt reads the prompt_token_ids array at c.cur[i] while the chunk
// is validated (jsonscan.ValidMembersWith): a vLLM stream's first chunk
// carries the whole prompt's ids, which were validated and then scanned
// again to convert them. It declines any other member, and ids it cannot
// read on the fast path (appendPlainInts), which are validated as before
// and read by topField.
func (c *choices) readPrompt(key jsonscan.Span, i int) (int, bool) {
	if string(c.cur[key.Start:key.End]) != `"prompt_token_ids"` || c.promptAt >= 0 || c.prompt.seen {
		return 0, false
	}
	ids, n, ok := appendPlainInts(nil, c.cur[i:])
	if !ok {
		return 0, false
	}
	if ids == nil {
		ids = []int32{}
	}
	c.promptRead, c.promptAt = ids, i
	return i + n, true
}

// promptIDs is tokenIDs for a top-level prompt_token_ids value, taking
// what readPrompt read when v is that value.
func (c *choices) promptIDs(v val) ([]int32, bool) {
	if c.promptAt >= 0 && len(v.raw) > 0 && &v.raw[0] == &c.cur[c.promptAt] {
		return c.promptRead, true
	}
	return tokenIDs(v)
}

// sglext reads SGLang's response-level token ids: input_ids (the prompt) and
// output_ids (one list per choice).
func (c *choices) sglext(v val) {
	if ids, ok := tokenIDs(v.Get("input_ids")); ok && !c.sglIn.seen {
		c.sglIn = idList{ids, true}
	}
	for i, out := range v.g().Get("output_ids").Array() {
		if ids, ok := tokenIDs(valOf([]byte(out.Raw))); ok {
			c.sglOut[int64(i)] = append(c.sglOut[int64(i)], ids...)
		}
	}
}

func (c *choices) choice(i int64) *choice {
	ch := c.byIndex[i]
	if ch == nil {
		ch = &choice{c: c, index: i}
		ch.lp.valuesOnly = c.unseen.has("logprobs", true)
		ch.fields.set("index", []byte(itoa64(i)))
		c.byIndex[i] = ch
	}
	return ch
}

func (c *choices) sorted() []*choice {
	idx := sortedKeys(c.byIndex)
	out := make([]*choice, len(idx))
	for j, i := range idx {
		out[j] = c.byIndex[i]
	}
	return out
}

// result assembles the response, once: building it hands the stream's
// buffers to later streams (see listPool), so a later call returns the
// same Result.
func (c *choices) result() Result {
	if c.final == nil {
		r := c.build()
		c.final = &r
	}
	return *c.final
}

func (c *choices) build() Result {
	c.tpl = c.tpl.recycle()
	c.members, c.cur, c.validated = nil, nil, nil
	r := Result{Done: c.done, Err: strings.Join(c.errs, "; "), Usage: c.usage}
	if len(c.top.members) == 0 {
		return r
	}
	chs := c.sorted()
	preps := make([]prepared, len(chs))
	toks := make([]choiceTokens, len(chs))
	size := c.top.size()
	for j, ch := range chs {
		ch.ids.ids, ch.lp.values = settle(&idLists, ch.ids.ids), settle(&lpLists, ch.lp.values)
		preps[j] = ch.prepare(c.chat)
		size += ch.size(&preps[j]) + 1
		toks[j] = ch.tokens()
		if out, ok := c.sglOut[ch.index]; ok && !toks[j].ids.seen {
			toks[j].ids = idList{out, true}
		}
	}
	// The response is written once, into one buffer: the choices, their
	// logprobs and token ids straight from what was accumulated.
	c.top.set("choices", nullJSON) // keeps its place; appended at the end if no chunk had it
	c.unseen.apply(&c.top, false)
	r.Response = c.top.appendTo(make([]byte, 0, size+2), func(b []byte, k string) ([]byte, bool) {
		if k != "choices" {
			return b, false
		}
		b = append(b, '[')
		for j, ch := range chs {
			if j > 0 {
				b = append(b, ',')
			}
			b = ch.appendTo(b, &preps[j])
		}
		return append(b, ']'), true
	})
	for _, ch := range chs {
		ch.texts.recycle()
	}
	if m, ok := c.top.get("model"); ok {
		r.Model = gjson.ParseBytes(m).String()
	}
	prompt := c.prompt
	if !prompt.seen {
		prompt = c.sglIn
	}
	for _, ch := range chs {
		if !prompt.seen && ch.prompt.seen {
			prompt = ch.prompt
		}
	}
	r.Tokens = buildTokens(prompt, toks, completionTokens(c.usage))
	return r
}

// completionTokens reads usage.completion_tokens, -1 when absent.
func completionTokens(usage []byte) int64 {
	v := gjson.GetBytes(usage, "completion_tokens")
	if usage == nil || v.Type != gjson.Number {
		return -1
	}
	return v.Int()
}

func (c *choices) started() bool { return len(c.top.members) > 0 }
