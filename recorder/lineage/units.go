package lineage

import (
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

// Units returns the canonical message units of a call of api
// (chat.completions, responses or messages), as classification compares
// them: prompt has one unit per message or input item of the request, in
// order, 0 for an item that makes none (a reasoning item); out has the
// units of the output a thread keeps (choice 0's message, the non-reasoning
// output items, the message). The header unit (tools, instructions,
// system) is in neither. Two items with the same unit say the same thing
// to the model, however the harness wrote them. ok is false for other APIs
// and for a request that is not a JSON object.
func Units(api string, req, resp []byte) (prompt, out []uint64, ok bool) {
	f := itemUnit(api)
	r := gjson.Parse(transient(req))
	if f == nil || !r.IsObject() {
		return nil, nil, false
	}
	q := parseRequest(r)
	list := q.messages
	if api == recorder.APIResponses {
		list = q.input
		if list.Type == gjson.String {
			prompt = append(prompt, responsesMessage("user", list))
		}
	}
	eachElem(list, func(m gjson.Result) { prompt = append(prompt, f(m)) })
	return prompt, outputUnits(api, gjson.Parse(transient(resp))), true
}

// itemUnit returns the unit of one request message or input item of api,
// or nil when api has no message units.
func itemUnit(api string) func(gjson.Result) uint64 {
	switch api {
	case recorder.APIChatCompletions:
		return chatMessage
	case recorder.APIResponses:
		return responsesItem
	case recorder.APIMessages:
		return anthropicRequestMessage
	}
	return nil
}

// outputUnits returns the units of the output a thread keeps of a
// response object of api.
func outputUnits(api string, out gjson.Result) []uint64 {
	switch api {
	case recorder.APIChatCompletions:
		var us []uint64
		eachElem(out.Get("choices"), func(c gjson.Result) {
			if us == nil && c.Get("index").Int() == 0 {
				us = []uint64{chatMessage(c.Get("message"))}
			}
		})
		return us
	case recorder.APIResponses:
		var us []uint64
		eachElem(out.Get("output"), func(it gjson.Result) {
			if u := responsesItem(it); u != skipUnit {
				us = append(us, u)
			}
		})
		return us
	case recorder.APIMessages:
		if content := out.Get("content"); content.IsArray() {
			return []uint64{anthropicMessage(out.Get("role").Str, content)}
		}
	}
	return nil
}
