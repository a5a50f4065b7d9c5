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

// scanRequest is parseRequest over a request it validates on the way
// (unless checked says it is known valid); it reports false if the request
// is not a valid JSON object without escaped keys.
func scanRequest(req []byte, checked bool) (request, bool) {
	var q request
	i := jsonscan.SkipSpace(req, 0)
	if i >= len(req) || req[i] != '{' {
		return q, false
	}
	end, ok := scanMembers(req, i, checked, func(k []byte, s, e int) bool {
		q.set(string(k[1:len(k)-1]), spanResult(req, s, e))
		return true
	})
	if !ok || jsonscan.SkipSpace(req, end) != len(req) {
		return request{}, false
	}
	q.valid = true
	return q, true
}

// choice is the index and message of one element of a response's choices.
type choice struct{ index, message gjson.Result }

// scanChoices returns, for each element of resp's "choices" (its first
// top-level one, as gjson's Get finds it), c.Get("index") and
// c.Get("message"), validating the choices element by element as it finds
// them (unless checked says resp is known valid: then they are only
// skipped): the logprobs and token ids of a vLLM choice are walked once. isArray
// is false where there are no choices or they are not an array; ok is
// false where it cannot tell (not an object, invalid JSON, an escaped key)
// and the caller asks gjson. The result is appended to buf.
func scanChoices(resp []byte, checked bool, buf []choice) (cs []choice, isArray, ok bool) {
	i := jsonscan.SkipSpace(resp, 0)
	if i >= len(resp) || resp[i] != '{' {
		return buf, false, false
	}
	i = jsonscan.SkipSpace(resp, i+1)
	if i < len(resp) && resp[i] == '}' {
		return buf, false, true
	}
	for {
		if i >= len(resp) || resp[i] != '"' {
			return buf, false, false
		}
		ke, ok := skip(resp, i, checked)
		if !ok || bytes.IndexByte(resp[i:ke], '\\') >= 0 {
			return buf, false, false
		}
		j := jsonscan.SkipSpace(resp, ke)
		if j >= len(resp) || resp[j] != ':' {
			return buf, false, false
		}
		v := jsonscan.SkipSpace(resp, j+1)
		if keyIs(resp[i:ke], "choices") {
			if v >= len(resp) || resp[v] != '[' {
				_, ok := skip(resp, v, checked)
				return buf, false, ok
			}
			return scanChoiceArray(resp, v, checked, buf)
		}
		e, ok := skip(resp, v, checked)
		if !ok {
			return buf, false, false
		}
		i = jsonscan.SkipSpace(resp, e)
		if i >= len(resp) {
			return buf, false, false
		}
		switch resp[i] {
		case '}':
			return buf, false, true
		case ',':
			i = jsonscan.SkipSpace(resp, i+1)
		default:
			return buf, false, false
		}
	}
}

// scanChoiceArray is scanChoices' walk of the array at b[i].
func scanChoiceArray(b []byte, i int, checked bool, buf []choice) ([]choice, bool, bool) {
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return buf, true, true
	}
	for {
		var c choice
		var hasIndex, hasMessage, ok bool
		e := i
		if i < len(b) && b[i] == '{' {
			e, ok = scanMembers(b, i, checked, func(k []byte, s, e int) bool {
				switch {
				case !hasIndex && keyIs(k, "index"):
					c.index, hasIndex = spanResult(b, s, e), true
				case !hasMessage && keyIs(k, "message"):
					c.message, hasMessage = spanResult(b, s, e), true
				}
				return true
			})
		}
		if !ok {
			if e, ok = skip(b, i, checked); !ok {
				return buf, false, false
			}
			el := spanResult(b, i, e)
			c = choice{el.Get("index"), el.Get("message")}
		}
		buf = append(buf, c)
		i = jsonscan.SkipSpace(b, e)
		if i >= len(b) {
			return buf, false, false
		}
		switch b[i] {
		case ']':
			return buf, true, true
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		default:
			return buf, false, false
		}
	}
}
