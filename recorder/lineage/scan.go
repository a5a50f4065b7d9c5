package lineage

import (
	"bytes"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// The extraction finds a call's fields with internal/jsonscan: one
// validating pass over what it reads, then jumps from value to value,
// instead of gjson walking a value again for each lookup (a vLLM response
// carries a logprobs object per choice and the prompt's token ids). It
// only runs on JSON it has validated, where its spans are exactly the ones
// gjson finds; anything else (invalid JSON, escaped keys) goes to gjson as
// before, so the results never differ.

// raw views s, a gjson Raw, as bytes without copying. The bytes are only
// read.
func raw(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// spanResult is the gjson Result of the valid value b[s:e], the same as
// the Result gjson's Get or ForEach returns for it (less Index).
func spanResult(b []byte, s, e int) gjson.Result {
	return gjson.Parse(transient(b[s:e]))
}

// keyIs reports whether the raw key k (quotes included, no escapes) is
// name.
func keyIs(k []byte, name string) bool {
	return len(k) == len(name)+2 && string(k[1:len(k)-1]) == name
}

// scanMembers walks the object starting at b[i] (which must be '{'),
// validating each key and value as it goes unless checked says the object
// is known valid, and calls fn with each raw
// key and its value's span; fn returns false to stop. It reports the end
// of the walk and false if the JSON it walked was not valid or had an
// escaped key (the caller then asks gjson).
func scanMembers(b []byte, i int, checked bool, fn func(k []byte, s, e int) bool) (int, bool) {
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		ke, ok := skip(b, i, checked)
		if !ok || bytes.IndexByte(b[i:ke], '\\') >= 0 {
			return i, false
		}
		j := jsonscan.SkipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return j, false
		}
		s := jsonscan.SkipSpace(b, j+1)
		e, ok := skip(b, s, checked)
		if !ok {
			return e, false
		}
		if !fn(b[i:ke], s, e) {
			return e, true
		}
		i = jsonscan.SkipSpace(b, e)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		default:
			return i, false
		}
	}
}

// skip returns the end of the value at b[i], validating it unless checked.
func skip(b []byte, i int, checked bool) (int, bool) {
	if checked {
		return jsonscan.SkipValue(b, i), true
	}
	return jsonscan.ValidValue(b, i)
}

// eachSpan calls f with the span of each element of the valid array or
// the members of the valid object starting at b[i], skipping keys.
func eachSpan(b []byte, i int, f func(s, e int)) {
	i = jsonscan.SkipSpace(b, i+1)
	for i < len(b) && b[i] != ']' && b[i] != '}' {
		e := jsonscan.SkipValue(b, i)
		f(i, e)
		i = jsonscan.SkipSpace(b, e)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
	}
}

// elems calls f for each element of a JSON array, and not at all for
// anything else; valid says a was taken from JSON already validated.
func elems(a gjson.Result, valid bool, f func(gjson.Result)) {
	if !valid {
		eachElem(a, f)
		return
	}
	if !a.IsArray() {
		return
	}
	b := raw(a.Raw)
	eachSpan(b, 0, func(s, e int) { f(spanResult(b, s, e)) })
}

// get returns v.Get(key) for a key without special characters; valid says
// v was taken from JSON already validated.
func get(v gjson.Result, valid bool, key string) gjson.Result {
	if !valid || !v.IsObject() {
		return v.Get(key)
	}
	b := raw(v.Raw)
	var r gjson.Result
	if _, ok := scanMembers(b, 0, true, func(k []byte, s, e int) bool {
		if keyIs(k, key) {
			r = spanResult(b, s, e)
			return false
		}
		return true
	}); !ok {
		return v.Get(key)
	}
	return r
}

// scanRequest is parseRequest over a request it validates on the way; it
// reports false if the request is not a valid JSON object without escaped
// keys.
func scanRequest(req []byte) (request, bool) {
	var q request
	i := jsonscan.SkipSpace(req, 0)
	if i >= len(req) || req[i] != '{' {
		return q, false
	}
	end, ok := scanMembers(req, i, false, func(k []byte, s, e int) bool {
		v := spanResult(req, s, e)
		switch string(k[1 : len(k)-1]) {
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
		return true
	})
	if !ok || jsonscan.SkipSpace(req, end) != len(req) {
		return request{}, false
	}
	q.valid = true
	return q, true
}

// scanTop returns gjson.Get(resp, key) for a response object, validating
// only what it walks up to key (gjson stops there too). It reports false
// where it cannot tell (not an object, invalid JSON before key, an escaped
// key), and the caller asks gjson.
func scanTop(resp []byte, key string) (v gjson.Result, ok bool) {
	i := jsonscan.SkipSpace(resp, 0)
	if i >= len(resp) || resp[i] != '{' {
		return v, false
	}
	found := false
	_, ok = scanMembers(resp, i, false, func(k []byte, s, e int) bool {
		if keyIs(k, key) {
			v, found = spanResult(resp, s, e), true
			return false
		}
		return true
	})
	if !ok && !found {
		return gjson.Result{}, false
	}
	return v, true
}

// choiceFields returns c.Get("index") and c.Get("message") of a choice
// taken from validated JSON, stopping at the later of the two: the logprobs
// and token ids after them are not walked.
func choiceFields(c gjson.Result) (index, message gjson.Result) {
	if !c.IsObject() {
		return c.Get("index"), c.Get("message")
	}
	b := raw(c.Raw)
	var hasIndex, hasMessage bool
	if _, ok := scanMembers(b, 0, true, func(k []byte, s, e int) bool {
		switch {
		case !hasIndex && keyIs(k, "index"):
			index, hasIndex = spanResult(b, s, e), true
		case !hasMessage && keyIs(k, "message"):
			message, hasMessage = spanResult(b, s, e), true
		}
		return !hasIndex || !hasMessage
	}); !ok {
		return c.Get("index"), c.Get("message")
	}
	return index, message
}
