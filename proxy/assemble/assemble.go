package assemble

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/internal/sse"
	"github.com/orchard-rl/orchard/recorder"
)

// Result is what assembly recovers from one response body.
type Result struct {
	// Response is one JSON object equal to what the non-streaming API returns
	// for the same generation (a partial one when the stream was cut). When a
	// non-streaming body is not JSON, it is kept as a JSON string.
	Response json.RawMessage
	// Usage is the response's usage object, nil when none was reported.
	Usage json.RawMessage
	// Model is the model the upstream reported.
	Model string
	// Tokens holds engine token ids and logprobs, nil when none were sent.
	Tokens *recorder.Tokens
	// Done reports whether the response completed: the terminal stream event
	// was seen ([DONE]; response.completed, .failed or .incomplete;
	// message_stop) or a non-streaming body was a complete JSON object.
	Done bool
	// Err describes an error the upstream reported in the body (an error
	// event or error object) or a malformed part of the body.
	Err string
}

// Stream assembles an SSE response body of the given API (one of the
// recorder.API* names of a generation API). The body must already be decoded
// from any Content-Encoding. It never panics; unknown APIs yield Err.
func Stream(api recorder.API, body []byte) Result {
	a, err := newAssembler(api)
	if err != nil {
		return Result{Err: err.Error()}
	}
	// The body is whole: walk it in place rather than through a Streamer's
	// Framer. TestStreamerPieces holds the two paths to the same result.
	for ev := range sse.Events(body) {
		if ev.HasData {
			a.event(ev.Name, ev.Data)
		}
	}
	return a.result()
}

// newAssembler returns the stream assembler of a generation API.
func newAssembler(api recorder.API) (streamAssembler, error) {
	switch api {
	case recorder.APIChatCompletions:
		return newChoices(true), nil
	case recorder.APICompletions:
		return newChoices(false), nil
	case recorder.APIResponses:
		return &responses{}, nil
	case recorder.APIMessages:
		return &messages{}, nil
	}
	return nil, fmt.Errorf("assemble: unsupported api %q", api)
}

// streamAssembler consumes the events of one stream.
type streamAssembler interface {
	// event consumes one event; data is only valid during the call.
	event(name string, data []byte)
	// started reports whether result would return a Response.
	started() bool
	result() Result
}

// JSON extracts usage, model and tokens from a non-streaming response body of
// the given API. Response is the body itself when it is valid JSON.
func JSON(api recorder.API, body []byte) Result {
	if !gjson.ValidBytes(body) {
		return Result{Response: quote(body), Err: "response body is not valid JSON"}
	}
	root := gjson.ParseBytes(body)
	r := Result{Response: json.RawMessage(body), Done: root.IsObject()}
	if !r.Done {
		r.Err = "response body is not a JSON object"
		return r
	}
	if e := errorMessage(root); e != "" {
		r.Err = e
	}
	r.Model = root.Get("model").String()
	if u := root.Get("usage"); u.Exists() && u.Type != gjson.Null {
		r.Usage = json.RawMessage(u.Raw)
	}
	switch api {
	case recorder.APIChatCompletions, recorder.APICompletions:
		r.Tokens = jsonTokens(root, api == recorder.APIChatCompletions)
	}
	return r
}

// sortedKeys returns m's keys (indexes of choices, tool calls, items,
// parts, blocks) in ascending order, in one allocation:
// slices.Sorted(maps.Keys(m)) grew its slice from nil, several allocations
// a stream for a map of one key.
func sortedKeys[V any](m map[int64]V) []int64 {
	idx := make([]int64, 0, len(m))
	for i := range m {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// errorMessage returns the message of an error object or error chunk
// ({"error":{...}}, {"object":"error",...}, {"type":"error",...}), or "".
// mayBeError reports whether a JSON document could hold an error object:
// every shape errorMessage recognises contains the string "error".
func mayBeError(data []byte) bool { return bytes.Contains(data, []byte(`"error"`)) }

func errorMessage(v gjson.Result) string {
	e := v.Get("error")
	if v.Get("object").String() == "error" || (v.Get("type").String() == "error" && !e.Exists()) {
		e = v
	}
	switch {
	case !e.Exists() || e.Type == gjson.Null:
		return ""
	case e.Type == gjson.String:
		return e.String()
	case e.Get("message").Exists():
		return e.Get("message").String()
	}
	return e.Raw
}

// tokenIDs reads a JSON array of token ids; ok is false for anything else.
func tokenIDs(v val) ([]int32, bool) {
	out, _, ok := appendIDs(nil, v)
	if ok && out == nil {
		out = []int32{}
	}
	return out, ok
}

// appendIDs appends the token ids of the JSON array v to dst and says how
// many; for anything but an array of integers that fit in an int32 (every
// vocabulary does) it appends nothing and ok is false. It runs for every
// chunk of a vLLM stream (token_ids).
func appendIDs(dst []int32, v val) (out []int32, n int, ok bool) {
	if !v.IsArray() {
		return dst, 0, false
	}
	start := len(dst)
	fast, _, ok := appendPlainInts(dst, v.raw)
	if ok {
		return fast, len(fast) - start, true
	}
	return appendIDsSlow(fast[:start], v)
}

// appendPlainInts appends the elements of the JSON array that b starts with
// to dst when each is a plain integer (digits without sign, fraction,
// exponent or leading zero) that fits an int32, as engines write token ids,
// and reports where the array ends in b; such an array is valid JSON. On
// anything else it reports false, with dst's contents past its length
// undefined, and the caller takes the general path. Prompt ids run to
// thousands a call, and the general path scanned each twice, through a
// callback.
func appendPlainInts(dst []int32, b []byte) ([]int32, int, bool) {
	if n, end, ok := oneID(b); ok {
		return append(growFirst(dst, idRoom), n), end, true
	}
	if len(b) > 64 && cap(dst)-len(dst) < len(b)/4 {
		dst = slices.Grow(dst, bytes.Count(b, []byte{','})+1)
	}
	i := jsonscan.SkipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return dst, i + 1, true
	}
	dst = growFirst(dst, idRoom)
	for i < len(b) {
		dst, i = appendIDWords(dst, b, i)
		j, n := i, uint64(0)
		for j < len(b) {
			d := b[j] - '0'
			if d > 9 {
				break
			}
			n = n*10 + uint64(d) // wraps past 19 digits; more than 10 are refused below
			j++
		}
		if j == i || j-i > 10 || n > math.MaxInt32 || (b[i] == '0' && j-i > 1) {
			return dst, 0, false
		}
		dst = append(dst, int32(n))
		if j < len(b) && b[j] == ',' && j+1 < len(b) && b[j+1]-'0' <= 9 {
			i = j + 1 // the usual "1,2": no space to skip
			continue
		}
		i = jsonscan.SkipSpace(b, j)
		switch {
		case i < len(b) && b[i] == ',':
			i = jsonscan.SkipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return dst, i + 1, true
		default:
			return dst, 0, false
		}
	}
	return dst, 0, false
}

// oneID reads a list of one plain integer written without space, "[123]",
// as each chunk of a stream carries its token's id, and where it ends.
func oneID(b []byte) (int32, int, bool) {
	var n uint64
	j := 1
	for ; j < len(b) && j <= 10; j++ {
		d := b[j] - '0'
		if d > 9 {
			break
		}
		n = n*10 + uint64(d)
	}
	if len(b) < 3 || b[0] != '[' || j == 1 || j >= len(b) || b[j] != ']' || n > math.MaxInt32 || b[1] == '0' && j > 2 {
		return 0, 0, false
	}
	return int32(n), j + 1, true
}

// appendIDWords appends the ids of a list of plain integers from b[i] on
// while each is one to seven digits, without a leading zero, followed by a
// comma, and returns where it stopped: at the first id it did not read.
// It reads each id and its comma from the eight bytes at its start, taken
// as one word (jsonscan.DigitsAt): a prompt's ids cost about half the
// instructions of the byte loop of appendPlainInts (BenchmarkAppendIDs: 68
// against 120 an id).
func appendIDWords(dst []int32, b []byte, i int) ([]int32, int) {
	for len(b)-i >= 8 {
		k := jsonscan.DigitsAt(b, i)
		if k == 0 || b[i+k] != ',' {
			break
		}
		// The digits as the low end of an eight-digit number, combined in
		// pairs, then fours, then eights.
		x := (binary.LittleEndian.Uint64(b[i:]) - 0x3030303030303030) << (64 - 8*k)
		x = (x*10 + x>>8) & 0x00FF00FF00FF00FF
		x = (x*100 + x>>16) & 0x0000FFFF0000FFFF
		x = (x*10000 + x>>32) & 0xFFFFFFFF
		dst = append(dst, int32(x))
		i += k + 1
	}
	return dst, i
}

// idRoom is the room a list of token ids or logprobs gets with its first
// element (see growFirst).
const idRoom = 64

// growFirst returns s, or, when it has no room at all, an empty slice with
// room for n elements: for a list about to take its first elements, which
// grown from nothing by append took about ten allocations. A stream's own
// lists start in a listPool's buffer instead.
func growFirst[T any](s []T, n int) []T {
	if cap(s) == 0 {
		return make([]T, 0, n)
	}
	return s
}

// appendIDsSlow is appendIDs for any array: each element read as a value.
// The fast path took every array engines write, so this one can afford to
// check that v is JSON at all.
func appendIDsSlow(dst []int32, v val) (out []int32, n int, ok bool) {
	if !gjson.ValidBytes(v.raw) {
		return dst, 0, false
	}
	start := len(dst)
	ok = true
	v.ForEach(func(_, x val) bool {
		id := x.Int()
		if ok = x.Type == gjson.Number && id == int64(int32(id)); !ok {
			return false
		}
		dst = append(dst, int32(id))
		return true
	})
	if !ok {
		return dst[:start], 0, false
	}
	return dst, len(dst) - start, true
}
