package assemble

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"
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
	sglIn   idList // sglext.input_ids (SGLang)
	sglOut  map[int64][]int64
	nChunks int
}

// idList is a list of token ids and whether the upstream sent it at all.
type idList struct {
	ids  []int64
	seen bool
}

func newChoices(chat bool) *choices {
	return &choices{chat: chat, byIndex: map[int64]*choice{}, sglOut: map[int64][]int64{}}
}

func (c *choices) event(_ string, data []byte) {
	if string(data) == "[DONE]" {
		c.done = true
		return
	}
	c.nChunks++
	if !gjson.ValidBytes(data) {
		c.errs = append(c.errs, "malformed chunk "+itoa(c.nChunks))
		return
	}
	root := gjson.ParseBytes(data)
	// Every chunk passes here: look for an error object only in the rare
	// chunk that mentions one, instead of three lookups per chunk.
	if mayBeError(data) {
		if e := errorMessage(root); e != "" {
			c.errs = append(c.errs, e)
			return
		}
	}
	root.ForEach(func(k, v gjson.Result) bool {
		c.topField(k.String(), v)
		return true
	})
}

func (c *choices) topField(k string, v gjson.Result) {
	switch k {
	case "choices":
		c.top.set("choices", nullJSON) // filled by result
		v.ForEach(func(_, ch gjson.Result) bool {
			c.choice(ch.Get("index").Int()).add(ch, c.chat)
			return true
		})
	case "object":
		if c.chat && v.String() == "chat.completion.chunk" {
			c.top.set(k, quote("chat.completion"))
		} else {
			c.top.merge(k, []byte(v.Raw))
		}
	case "usage":
		if v.Type != gjson.Null {
			c.usage = []byte(v.Raw)
		}
		c.top.merge(k, []byte(v.Raw))
	case "prompt_token_ids":
		if ids, ok := int64s(v); ok && !c.prompt.seen {
			c.prompt = idList{ids, true}
		}
		c.top.merge(k, []byte(v.Raw))
	case "sglext":
		c.sglext(v)
		c.top.merge(k, []byte(v.Raw))
	default:
		c.top.merge(k, []byte(v.Raw))
	}
}

// sglext reads SGLang's response-level token ids: input_ids (the prompt) and
// output_ids (one list per choice).
func (c *choices) sglext(v gjson.Result) {
	if ids, ok := int64s(v.Get("input_ids")); ok && !c.sglIn.seen {
		c.sglIn = idList{ids, true}
	}
	for i, out := range v.Get("output_ids").Array() {
		if ids, ok := int64s(out); ok {
			c.sglOut[int64(i)] = append(c.sglOut[int64(i)], ids...)
		}
	}
}

func (c *choices) choice(i int64) *choice {
	ch := c.byIndex[i]
	if ch == nil {
		ch = &choice{index: i}
		ch.fields.set("index", []byte(itoa64(i)))
		c.byIndex[i] = ch
	}
	return ch
}

func (c *choices) sorted() []*choice {
	idx := make([]int64, 0, len(c.byIndex))
	for i := range c.byIndex {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	out := make([]*choice, len(idx))
	for j, i := range idx {
		out[j] = c.byIndex[i]
	}
	return out
}

func (c *choices) result() Result {
	r := Result{Done: c.done, Err: strings.Join(c.errs, "; "), Usage: c.usage}
	if len(c.top.keys) == 0 {
		return r
	}
	chs := c.sorted()
	rendered := make([][]byte, len(chs))
	toks := make([]choiceTokens, len(chs))
	for j, ch := range chs {
		rendered[j] = ch.render(c.chat)
		toks[j] = ch.tokens()
		if out, ok := c.sglOut[ch.index]; ok && !toks[j].ids.seen {
			toks[j].ids = idList{out, true}
		}
	}
	c.top.set("choices", rawArray(rendered))
	r.Response = c.top.bytes()
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
