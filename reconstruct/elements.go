package reconstruct

import (
	"sort"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/lineage"
)

// A prompt is read as a list of elements: the top-level instructions (if
// any) followed by the messages or input items, each the raw JSON the
// harness sent. The lineage package reads the messages and items, with the
// unit classification compares each by; samples are laid out over them,
// and which call continues which is the lineage package's to say (see
// thread).

// elements is the element view of one request.
type elements struct {
	raw    [][]byte // each element's JSON, sharing the request's memory
	units  []uint64 // each element's message unit; 0 for instructions and reasoning
	rank   []int    // rank[j]: how many of raw[:j] make a unit
	hasSys bool     // raw[0] is the top-level instructions, not a message
	read   bool     // the request was a JSON object and was read
}

// newElements reads the element view of a request body of api.
func newElements(api recorder.API, body []byte) elements {
	e := elements{read: true}
	switch api {
	case apiMessages:
		e.addSystem(body, "system")
	case apiResponses:
		e.addSystem(body, "instructions")
	case apiCompletions:
		if p := gjson.Get(unsafeString(body), "prompt"); p.Exists() {
			e.raw = append(e.raw, sub(body, p))
		}
		return e
	}
	items, _ := lineage.Items(api, body)
	for _, it := range items {
		e.raw = append(e.raw, it.Raw)
		e.units = append(e.units, it.Unit)
	}
	e.rank = rank(e.units)
	return e
}

func (e *elements) addSystem(body []byte, path string) {
	// decodeResponsesRequest only lifts string instructions into System
	if v := gjson.Get(unsafeString(body), path); v.Exists() && v.Type != gjson.Null && (path != "instructions" || v.Type == gjson.String) {
		e.raw = append(e.raw, sub(body, v))
		e.units = append(e.units, 0)
		e.hasSys = true
	}
}

// rank returns, for each j in 0..len(units), how many of units[:j] are
// units (not 0).
func rank(units []uint64) []int {
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
	if c.els.rank == nil || last.els.rank == nil {
		return len(c.els.raw), -1
	}
	k := sort.SearchInts(last.els.rank, c.els.rank[len(c.els.units)])
	if last.els.hasSys {
		k = max(k, 1)
	}
	u := last.els.units
	j := k
	for _, want := range c.out {
		for j < len(u) && u[j] == 0 {
			j++
		}
		if j == len(u) || u[j] != want {
			return len(c.els.raw), -1
		}
		j++
	}
	return k, j
}
