package lineage

import (
	"encoding/binary"
	"hash/maphash"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

// A message-level prompt is a sequence of units: first a header unit that
// hashes what the API keeps outside its message list (tools; the
// instructions of "responses"; the system of "messages"), then one unit per
// message or input item. A call's output is the assistant message (or
// output items) of each choice of its non-streaming response object.
//
// Each unit is a canonical hash of what a chat template renders: role,
// text, tool calls and results. Left out, because harnesses drop or rewrite
// them when echoing history without changing the conversation: ids of
// messages and items, status, refusal/annotations/logprobs/citations,
// cache_control, and reasoning (reasoning_content, thinking blocks,
// reasoning items). Whether reasoning reached the model is visible at the
// token level, as template_rewrite.

// extractor turns requests and responses of one API into units. memo maps
// the hash of a message's raw JSON to its unit, so the canonical walk runs
// once per distinct message of an episode rather than once per call.
type extractor struct {
	in   *seqInput[uint64]
	memo map[uint64]uint64
	// gjsonOnly makes extract find every field with gjson, as it did
	// before scan.go; the differential test compares the two.
	gjsonOnly bool
	// checked says the request and response are known to be valid JSON
	// (recorder.Call.Checked): the scans skip values without validating.
	checked bool
}

// maxMemo bounds an extractor's memo; past it the memo starts over.
const maxMemo = 1 << 14

// unit returns f(m), from the memo when m's raw JSON was seen before.
func (x *extractor) unit(m gjson.Result, f func(gjson.Result) uint64) uint64 {
	k := maphash.String(seed, m.Raw)
	if u, ok := x.memo[k]; ok {
		return u
	}
	if len(x.memo) >= maxMemo {
		clear(x.memo)
	}
	u := f(m)
	x.memo[k] = u
	return u
}

// header returns f(), the unit of what a request keeps outside its
// messages (a and b: tools and functions, tools and instructions, tools and
// system), from the memo when the same bytes were seen before: agents send
// the same tool schemas with every call of an episode.
func (x *extractor) header(a, b gjson.Result, f func() uint64) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(a.Raw)))
	h.Write(n[:]) // the length keeps (a, b) apart from (a+b[:k], b[k:])
	h.WriteString(a.Raw)
	h.WriteString(b.Raw)
	k := h.Sum64()
	if u, ok := x.memo[k]; ok {
		return u
	}
	if len(x.memo) >= maxMemo {
		clear(x.memo)
	}
	u := f()
	x.memo[k] = u
	return u
}

// toolsAndText is the header of an API that keeps tools and a text beside
// its messages (the instructions of "responses", the system of "messages").
func (x *extractor) toolsAndText(api string, tools, text gjson.Result) uint64 {
	return x.header(tools, text, func() uint64 {
		h := newHasher(api)
		h.value(tools, 0)
		h.content(text, 0)
		return h.sum()
	})
}

// request holds the top-level fields of a request body that classification
// reads, found in one pass over the document.
type request struct {
	tools, functions, messages, input, instructions, system, previous gjson.Result
	// valid says the request was validated by scanRequest, so the fields'
	// values can be walked with jsonscan.
	valid bool
}

func parseRequest(r gjson.Result) request {
	var q request
	r.ForEach(func(k, v gjson.Result) bool {
		q.set(k.Str, v)
		return true
	})
	return q
}

// set keeps v when key names a field the classification reads; both
// request parsers go through it.
func (q *request) set(key string, v gjson.Result) {
	switch key {
	case "tools":
		q.tools = v
	case "functions":
		q.functions = v
	case "messages":
		q.messages = v
	case "input":
		q.input = v
	case "instructions":
		q.instructions = v
	case "system":
		q.system = v
	case "previous_response_id":
		q.previous = v
	}
}

// extract fills x.in with the message-level view of a call of api
// (chat.completions, responses or messages). It reports false when the
// request is not a JSON object. prevID is the responses API's
// previous_response_id. Neither req nor resp is retained.
func (x *extractor) extract(api recorder.API, req, resp []byte) (prevID string, ok bool) {
	q, ok := request{}, false
	if !x.gjsonOnly {
		q, ok = scanRequest(req, x.checked)
	}
	if !ok {
		r := gjson.Parse(transient(req))
		if !r.IsObject() {
			return "", false
		}
		q = parseRequest(r)
	}
	out := gjson.Parse(transient(resp))
	switch api {
	case recorder.APIChatCompletions:
		x.chat(q, resp, out)
	case recorder.APIResponses:
		x.responses(q, out)
		prevID = q.previous.Str
	case recorder.APIMessages:
		x.anthropic(q, out)
	default:
		return "", false
	}
	return prevID, true
}

// transient views b as a string without copying it. gjson never panics on
// malformed input, and the results are only hashed or copied, never kept,
// so they do not outlive b.
func transient(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (in *seqInput[E]) reset() {
	in.prompt = in.prompt[:0]
	for i := range in.outs {
		in.outs[i] = in.outs[i][:0]
	}
	in.outs = in.outs[:0]
	in.promptSize, in.outSize, in.sys = 0, 0, 0
}

// addOut starts the output of one more choice and returns its index.
func (in *seqInput[E]) addOut() int {
	if len(in.outs) < cap(in.outs) {
		in.outs = in.outs[:len(in.outs)+1]
	} else {
		in.outs = append(in.outs, nil)
	}
	return len(in.outs) - 1
}

func (in *seqInput[E]) add(u E, size int) {
	in.prompt = append(in.prompt, u)
	in.promptSize += int64(size)
}

func (x *extractor) chat(q request, resp []byte, out gjson.Result) {
	in := x.in
	in.add(x.header(q.tools, q.functions, func() uint64 {
		h := newHasher("chat")
		h.value(q.tools, 0)
		h.value(q.functions, 0)
		return h.sum()
	}), len(q.tools.Raw))
	in.sys = 1
	leading := true
	elems(q.messages, q.valid, func(m gjson.Result) {
		if leading { // the role matters only to the leading system messages
			role := get(m, q.valid, "role").Str
			if role == "system" || role == "developer" {
				in.sys++
			} else {
				leading = false
			}
		}
		in.add(x.unit(m, chatMessage), len(m.Raw))
	})
	// Choice 0 first: it is the one a thread tip keeps. One walk collects
	// the messages (a choice also holds its logprobs, the bulk of a vLLM
	// response, which a walk per pass scanned again).
	var zeroBuf, otherBuf [1]gjson.Result
	zero, other := zeroBuf[:0], otherBuf[:0]
	add := func(index, message gjson.Result) {
		if index.Int() == 0 {
			zero = append(zero, message)
		} else {
			other = append(other, message)
		}
	}
	var csBuf [1]choice
	cs, isArray, ok := csBuf[:0], false, false
	if !x.gjsonOnly {
		cs, isArray, ok = scanChoices(resp, x.checked, cs)
	}
	switch {
	case ok && !isArray:
		return
	case ok:
		for _, c := range cs {
			add(c.index, c.message)
		}
	default:
		choices := out.Get("choices")
		if !choices.IsArray() {
			return
		}
		choices.ForEach(func(_, c gjson.Result) bool {
			add(c.Get("index"), c.Get("message"))
			return true
		})
	}
	for _, ms := range [2][]gjson.Result{zero, other} {
		for _, m := range ms {
			i := in.addOut()
			in.outs[i] = append(in.outs[i], x.unit(m, chatMessage))
			if i == 0 {
				in.outSize = int64(len(m.Raw))
			}
		}
	}
}

// chatMessage hashes a chat.completions message (request or response).
func chatMessage(m gjson.Result) uint64 {
	if !m.IsObject() {
		x := newHasher("chat.raw")
		x.value(m, 0)
		return x.sum()
	}
	var role, name, content, calls, callID, fn gjson.Result
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			role = v
		case "name":
			name = v
		case "content":
			content = v
		case "tool_calls":
			calls = v
		case "tool_call_id":
			callID = v
		case "function_call":
			fn = v
		}
		return true
	})
	x := newHasher("chat.msg")
	x.str(role.Str)
	x.str(name.Str)
	x.content(content, 0)
	x.word(tagArr)
	eachElem(calls, func(c gjson.Result) {
		id, name, args := toolCall(c)
		x.str(id.Str)
		x.str(name.Str)
		x.jsonString(args.Str)
	})
	x.word(tagEnd)
	x.str(callID.Str)
	if fn.IsObject() {
		x.str(fn.Get("name").Str)
		x.jsonString(fn.Get("arguments").Str)
	}
	return x.sum()
}

// toolCall returns a chat tool call's id, function name and arguments, as
// c.Get of "id", "function.name" and "function.arguments" would, in one
// walk of the call and one of its function instead of a walk per path.
func toolCall(c gjson.Result) (id, name, args gjson.Result) {
	var fn gjson.Result
	var n int
	c.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			if !id.Exists() {
				id = v
			}
		case "function":
			fn, n = v, n+1
		}
		return true
	})
	if n > 1 { // Get looks past a function without the member asked for
		return id, c.Get("function.name"), c.Get("function.arguments")
	}
	if !fn.IsObject() {
		return id, gjson.Result{}, gjson.Result{}
	}
	fn.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "name" && !name.Exists():
			name = v
		case k.Str == "arguments" && !args.Exists():
			args = v
		}
		return true
	})
	return id, name, args
}

// skipUnit marks, in the memo, an item that makes no unit (reasoning).
const skipUnit = 0

func (x *extractor) responses(q request, out gjson.Result) {
	in := x.in
	in.add(x.toolsAndText("responses", q.tools, q.instructions), len(q.tools.Raw)+len(q.instructions.Raw))
	in.sys = 1
	input := q.input
	if input.Type == gjson.String {
		in.add(responsesMessage("user", input), len(input.Raw))
	}
	leading := true
	elems(input, q.valid, func(it gjson.Result) {
		u := x.unit(it, responsesItem)
		if u == skipUnit {
			return
		}
		role := get(it, q.valid, "role").Str
		if leading && (role == "system" || role == "developer") {
			in.sys++
		} else {
			leading = false
		}
		in.add(u, len(it.Raw))
	})
	output := out.Get("output")
	if !output.IsArray() {
		return
	}
	i := in.addOut()
	output.ForEach(func(_, it gjson.Result) bool {
		if u := x.unit(it, responsesItem); u != skipUnit {
			in.outs[i] = append(in.outs[i], u)
			in.outSize += int64(len(it.Raw))
		}
		return true
	})
}

// responsesItem hashes an input or output item of the responses API, or
// returns skipUnit for reasoning items.
func responsesItem(it gjson.Result) uint64 {
	typ := it.Get("type").Str
	if typ == "" && it.Get("role").Exists() {
		typ = "message"
	}
	x := newHasher("responses.item")
	x.str(typ)
	switch typ {
	case "message":
		return responsesMessage(it.Get("role").Str, it.Get("content"))
	case "reasoning":
		return skipUnit
	case "function_call":
		x.str(it.Get("call_id").Str)
		x.str(it.Get("name").Str)
		x.jsonString(it.Get("arguments").Str)
	case "function_call_output":
		x.str(it.Get("call_id").Str)
		x.content(it.Get("output"), 0)
	case "item_reference":
		x.str(it.Get("id").Str)
	default:
		x.value(it, 0, "id", "status")
	}
	return x.sum()
}

func responsesMessage(role string, content gjson.Result) uint64 {
	x := newHasher("responses.item")
	x.str("message")
	x.str(role)
	x.content(content, 0)
	return x.sum()
}

func (x *extractor) anthropic(q request, out gjson.Result) {
	in := x.in
	in.add(x.toolsAndText("messages", q.tools, q.system), len(q.tools.Raw)+len(q.system.Raw))
	in.sys = 1
	elems(q.messages, q.valid, func(m gjson.Result) {
		in.add(x.unit(m, anthropicRequestMessage), len(m.Raw))
	})
	if content := out.Get("content"); content.IsArray() {
		i := in.addOut()
		in.outs[i] = append(in.outs[i], anthropicMessage(out.Get("role").Str, content))
		in.outSize = int64(len(out.Raw))
	}
}

func anthropicRequestMessage(m gjson.Result) uint64 {
	return anthropicMessage(m.Get("role").Str, m.Get("content"))
}

func anthropicMessage(role string, content gjson.Result) uint64 {
	x := newHasher("messages.msg")
	x.str(role)
	x.content(content, 0)
	return x.sum()
}

// content hashes message content: a string is the same as one text part,
// and null, "" and [] are the same empty content.
func (x *hasher) content(c gjson.Result, depth int) {
	x.word(tagArr)
	switch {
	case c.Type == gjson.String:
		x.text(c.Str)
	case c.IsArray() && depth < maxDepth:
		c.ForEach(func(_, p gjson.Result) bool {
			x.part(p, depth+1)
			return true
		})
	case c.Exists() && c.Type != gjson.Null:
		x.part(c, depth+1)
	}
	x.word(tagEnd)
}

func (x *hasher) text(s string) {
	if s != "" {
		x.str("text")
		x.str(s)
	}
}

// part hashes one content part or block of any of the APIs.
func (x *hasher) part(p gjson.Result, depth int) {
	if !p.IsObject() {
		x.value(p, depth)
		return
	}
	switch typ := p.Get("type").Str; typ {
	case "text", "input_text", "output_text":
		x.text(p.Get("text").Str)
	case "thinking", "redacted_thinking", "reasoning", "reasoning_text", "summary_text":
	case "tool_use":
		x.str(typ)
		x.str(p.Get("id").Str)
		x.str(p.Get("name").Str)
		x.value(p.Get("input"), depth+1)
	case "tool_result":
		x.str(typ)
		x.str(p.Get("tool_use_id").Str)
		x.content(p.Get("content"), depth+1)
		if p.Get("is_error").Bool() {
			x.word(tagTrue)
		}
	default:
		x.value(p, depth)
	}
}

// extractText fills in with a completions call's prompt and choice texts,
// byte by byte. It reports false unless the prompt is a string (or an
// array of exactly one string).
func extractText(req, resp []byte, in *seqInput[byte]) bool {
	p := gjson.Get(transient(req), "prompt")
	if p.IsArray() {
		a := p.Array()
		if len(a) != 1 {
			return false
		}
		p = a[0]
	}
	if p.Type != gjson.String {
		return false
	}
	in.prompt = append(in.prompt, p.Str...)
	in.promptSize = int64(len(p.Str))
	choices := gjson.Get(transient(resp), "choices")
	if !choices.IsArray() {
		return true
	}
	for pass := range 2 {
		choices.ForEach(func(_, c gjson.Result) bool {
			if (c.Get("index").Int() == 0) == (pass == 0) {
				i := in.addOut()
				in.outs[i] = append(in.outs[i], c.Get("text").Str...)
				if i == 0 {
					in.outSize = int64(len(in.outs[i]))
				}
			}
			return true
		})
	}
	return true
}

// eachElem calls f for each element of a JSON array, and not at all for
// anything else (gjson's ForEach visits a scalar once).
func eachElem(a gjson.Result, f func(gjson.Result)) {
	if !a.IsArray() {
		return
	}
	a.ForEach(func(_, e gjson.Result) bool {
		f(e)
		return true
	})
}
