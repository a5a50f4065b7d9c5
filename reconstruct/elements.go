package reconstruct

import (
	"sort"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/lineage"
)

// A prompt is read as a list of elements: the top-level instructions (if
// any) followed by the messages or input items, each the raw JSON the
// harness sent. Samples are laid out over them; which call continues
// which is the lineage package's to say (see thread).

// elements is the element view of one request.
type elements struct {
	raw    [][]byte // each element's JSON, sharing the request's memory
	hasSys bool     // raw[0] is the top-level instructions, not a message
	read   bool     // the request was a JSON object and was read
}

// newElements reads the element view of a request body of api.
func newElements(api string, body []byte) elements {
	e := elements{read: true}
	var listPath string
	switch api {
	case apiChat:
		listPath = "messages"
	case apiMessages:
		listPath = "messages"
		e.addSystem(body, "system")
	case apiResponses:
		listPath = "input"
		e.addSystem(body, "instructions")
	case apiCompletions:
		listPath = "prompt"
	}
	list := gjson.Get(unsafeString(body), listPath)
	if list.IsArray() && api != apiCompletions {
		list.ForEach(func(_, v gjson.Result) bool {
			e.raw = append(e.raw, sub(body, v))
			return true
		})
	} else if list.Exists() {
		e.raw = append(e.raw, sub(body, list))
	}
	return e
}

func (e *elements) addSystem(body []byte, path string) {
	// decodeResponsesRequest only lifts string instructions into System
	if v := gjson.Get(unsafeString(body), path); v.Exists() && v.Type != gjson.Null && (path != "instructions" || v.Type == gjson.String) {
		e.raw = append(e.raw, sub(body, v))
		e.hasSys = true
	}
}

// messageUnits returns the lineage package's message units of c: one per
// element of els (0 for the instructions element and for items that make
// none), and those of its output. units is nil when they do not line up
// with els.
func messageUnits(c *recorder.Call, els *elements) (units, out []uint64) {
	prompt, out, ok := lineage.Units(c.API, c.Request, c.Response)
	if !ok {
		return nil, nil
	}
	if els.hasSys {
		prompt = append([]uint64{0}, prompt...)
	}
	if len(prompt) != len(els.raw) {
		return nil, out
	}
	return prompt, out
}

// rank returns, for each j in 0..len(units), how many of units[:j] are
// units (not 0).
func rank(units []uint64) []int {
	if units == nil {
		return nil
	}
	r := make([]int, len(units)+1)
	for j, u := range units {
		r[j+1] = r[j]
		if u != 0 {
			r[j+1]++
		}
	}
	return r
}

// slotIn locates c's completion in the prompt of last, a later call of
// its segment: past as many message units as c's prompt has, the units of
// c's output, in order; items that make no unit (reasoning) in between
// belong to the slot. When they are not there, the slot starts after c's
// elements and end is -1.
func slotIn(c, last *callState) (start, end int) {
	if c.units == nil || last.units == nil {
		return len(c.els.raw), -1
	}
	k := sort.SearchInts(last.rank, c.rank[len(c.units)])
	if last.els.hasSys {
		k = max(k, 1)
	}
	j := k
	for _, u := range c.out {
		for j < len(last.units) && last.units[j] == 0 {
			j++
		}
		if j == len(last.units) || last.units[j] != u {
			return len(c.els.raw), -1
		}
		j++
	}
	return k, j
}
