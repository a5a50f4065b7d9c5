package lineage

import (
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

// Item is one message or input item of a request, as the harness sent it,
// with the canonical unit classification compares it by. Two items with
// the same unit say the same thing to the model, however the harness
// wrote them (key order, ids, content form, cache_control, reasoning).
type Item struct {
	Raw  []byte // its JSON, sharing the request body's memory
	Unit uint64 // 0 when it makes no unit (a reasoning item)
}

// Items returns the message items of a request of api (chat.completions,
// responses or messages) in order: the messages, or the input items of
// the responses API, where a string input is one user message. What the
// API keeps outside that list (tools, instructions, system) is not an
// item. ok is false for other APIs and for a request that is not a JSON
// object.
func Items(api recorder.API, req []byte) (items []Item, ok bool) {
	f := itemUnit(api)
	r := gjson.Parse(transient(req))
	if f == nil || !r.IsObject() {
		return nil, false
	}
	q := parseRequest(r)
	list := q.messages
	if api == recorder.APIResponses {
		list = q.input
		if list.Type == gjson.String {
			return []Item{{Raw: rawIn(req, list), Unit: responsesMessage("user", list)}}, true
		}
	}
	eachElem(list, func(m gjson.Result) {
		items = append(items, Item{Raw: rawIn(req, m), Unit: f(m)})
	})
	return items, true
}

// Output returns the units of the output a thread keeps of a response
// object of api: choice 0's message (chat.completions), the output items
// but reasoning (responses), the message (messages).
func Output(api recorder.API, resp []byte) []uint64 {
	out := gjson.Parse(transient(resp))
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

// itemUnit returns the unit of one request message or input item of api,
// or nil when api has no message units.
func itemUnit(api recorder.API) func(gjson.Result) uint64 {
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

// rawIn returns v, a value gjson found in b, as the bytes of b it
// occupies, or as a copy when gjson does not know where it is.
func rawIn(b []byte, v gjson.Result) []byte {
	i, n := v.Index, len(v.Raw)
	if i <= 0 || i+n > len(b) || string(b[i:i+n]) != v.Raw {
		return []byte(v.Raw)
	}
	return b[i : i+n : i+n]
}
