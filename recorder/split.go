package recorder

import (
	"bytes"
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// Top-level keys whose values are stored as content-addressed blocks. Agent
// harnesses resend these every turn, so each array element
// becomes one block, and a large non-array value becomes a single block.
var requestKeys = map[string]bool{"messages": true, "input": true, "tools": true, "system": true, "instructions": true}

// Response keys cut the same way, per API: a Responses API output item may
// come back as an input item of the next request, and Anthropic content
// blocks are kept as they always were. A chat or completions choice (the
// whole of such a response, 50-120 KB with vLLM's logprobs) is never sent
// again, so hashing it into blocks bought nothing; such a response is cut
// only at its prompt_token_ids (see promptids.go).
var (
	outputKeys  = map[string]bool{"output": true}
	contentKeys = map[string]bool{"content": true}
)

// responseKeys returns the response keys of api.
func responseKeys(api API) map[string]bool {
	switch api {
	case APIResponses:
		return outputKeys
	case APIMessages:
		return contentKeys
	}
	return nil
}

// minWholeBlock is the smallest non-array value worth a 16-byte reference.
const minWholeBlock = 64

// field is one top-level value cut out of a body. An array field keeps the
// exact bytes around its elements (lead after '[', sep between elements,
// trail before ']'); a whole field is one block.
type field struct {
	key              string
	hole             int // offset in the skeleton where the value was cut out
	whole            bool
	ids              bool // the call's prompt token ids (see promptids.go); no refs
	lead, sep, trail []byte
	refs             []BlockHash
	data             [][]byte // block bytes aligned with refs; encode side only
}

// split is a body with its dedup fields cut out: skeleton plus fields in
// increasing hole order. Joining them gives back the body byte for byte.
type split struct {
	skeleton []byte
	fields   []field
	// src and spans, when src is set, stand for the skeleton: src without
	// the spans (start and end pairs, in order). splitFast leaves it so,
	// and a large response's skeleton is then written from the body
	// straight into its document instead of being copied first.
	src   []byte
	spans []int
}

// skeletonLen is the length of s's skeleton.
func (s *split) skeletonLen() int {
	if s.src == nil {
		return len(s.skeleton)
	}
	n := len(s.src)
	for k := 0; k < len(s.spans); k += 2 {
		n -= s.spans[k+1] - s.spans[k]
	}
	return n
}

// appendSkeleton appends s's skeleton to dst.
func (s *split) appendSkeleton(dst []byte) []byte {
	if s.src == nil {
		return append(dst, s.skeleton...)
	}
	prev := 0
	for k := 0; k < len(s.spans); k += 2 {
		dst = append(dst, s.src[prev:s.spans[k]]...)
		prev = s.spans[k+1]
	}
	return append(dst, s.src[prev:]...)
}

// splitBody cuts the fields named in keys out of a JSON object body, and
// the response's copy of prompt (see promptIDsAt). It
// reports false when the body is not an object or has no such field, in
// which case the caller stores the body as a literal. Every cut is checked
// to rebuild its span exactly, so malformed input can only lose dedup,
// never bytes.
func splitBody(body []byte, keys map[string]bool, prompt []int32) (split, bool) {
	if s, ok, done := splitFast(body, keys, prompt); done {
		return s, ok
	}
	return splitGJSON(body, keys, prompt)
}

// splitFast is splitBody in one pass over a well-formed object with
// jsonscan: gjson found each member's end by scanning it, then each array
// element's again, and the prompt ids a third time to match them, which
// made splitting the largest part of encoding a vLLM call. It reports
// done false for what it leaves to splitGJSON: a body it cannot walk, a key
// with an escape, SGLang's sglext. It cuts what splitGJSON cuts from a
// valid body (TestSplitFastAgrees), and its spans are contiguous pieces of
// body, so the pieces always join back to it.
func splitFast(body []byte, keys map[string]bool, prompt []int32) (s split, ok, done bool) {
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return split{}, false, true
	}
	i = jsonscan.SkipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return split{}, false, true // no members; splitGJSON cuts nothing either
	}
	removed := 0
	var spans []int  // the cut values' extents, start and end
	var cut []string // keys cut so far: a repeated key stays in the skeleton
	for {
		if i >= len(body) || body[i] != '"' {
			return split{}, false, false
		}
		ke := jsonscan.SkipString(body, i)
		if ke-i < 2 || body[ke-1] != '"' {
			return split{}, false, false
		}
		key := body[i+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return split{}, false, false
		}
		i = jsonscan.SkipSpace(body, ke)
		if i >= len(body) || body[i] != ':' {
			return split{}, false, false
		}
		vs := jsonscan.SkipSpace(body, i+1)
		if vs >= len(body) {
			return split{}, false, false
		}
		ve, f, isCut := -1, field{}, false
		switch {
		case slices.Contains(cut, string(key)):
		case len(prompt) > 0 && string(key) == sglextKey:
			return split{}, false, false
		case len(prompt) > 0 && string(key) == promptIDsKey:
			if e := idsEnd(body, vs, prompt); e > 0 {
				ve, f, isCut = e, field{ids: true}, true
			}
		case keys[string(key)]:
			ve, f, isCut = cutFieldFast(body, vs)
		}
		if ve < 0 {
			ve = jsonscan.SkipValue(body, vs)
		}
		if ve <= vs || ve > len(body) {
			return split{}, false, false
		}
		if isCut {
			f.key = string(key)
			f.hole = vs - removed
			removed += ve - vs
			spans = append(spans, vs, ve)
			s.fields = append(s.fields, f)
			cut = append(cut, f.key)
		}
		i = jsonscan.SkipSpace(body, ve)
		if i >= len(body) {
			return split{}, false, false
		}
		if body[i] == '}' {
			break
		}
		if body[i] != ',' {
			return split{}, false, false
		}
		i = jsonscan.SkipSpace(body, i+1)
	}
	if jsonscan.SkipSpace(body, i+1) != len(body) {
		return split{}, false, false
	}
	if len(s.fields) == 0 {
		return split{}, false, true
	}
	s.src, s.spans = body, spans
	return s, true, true
}

// cutFieldFast is cutField for the value at body[i]: an array cut into
// element blocks, else one whole block when it is large enough (an array
// that cannot be cut is one block whatever its size, as in cutField). It
// returns the value's end, or -1 when it leaves the value uncut.
func cutFieldFast(body []byte, i int) (int, field, bool) {
	if body[i] == '[' {
		if f, end, ok := cutArrayFast(body, i); ok {
			return end, f, true
		}
	}
	end := jsonscan.SkipValue(body, i)
	if end <= i || end > len(body) || (body[i] != '[' && end-i < minWholeBlock) {
		return -1, field{}, false
	}
	span := body[i:end]
	return end, field{whole: true, refs: []BlockHash{HashBlock(span)}, data: [][]byte{span}}, true
}

// cutArrayFast is cutArray for the array at body[i], walking its elements
// once; it returns the array's end.
func cutArrayFast(body []byte, i int) (field, int, bool) {
	var f field
	j := jsonscan.SkipSpace(body, i+1)
	if j >= len(body) || body[j] == ']' {
		return field{}, 0, false
	}
	f.lead = body[i+1 : j]
	// The elements' extents, on the stack for most arrays, so that refs
	// and data are made once at their length instead of grown.
	bounds := make([]int, 0, 64)
	for {
		if j >= len(body) {
			return field{}, 0, false
		}
		e := jsonscan.SkipValue(body, j)
		if e <= j || e > len(body) {
			return field{}, 0, false
		}
		bounds = append(bounds, j, e)
		k := jsonscan.SkipSpace(body, e)
		if k >= len(body) {
			return field{}, 0, false
		}
		switch body[k] {
		case ']':
			f.trail = body[e:k]
			f.refs, f.data = blocksAt(body, bounds)
			return f, k + 1, true
		case ',':
			n := jsonscan.SkipSpace(body, k+1)
			if gap := body[e:n]; len(bounds) == 2 {
				f.sep = gap
			} else if !bytes.Equal(gap, f.sep) {
				return field{}, 0, false
			}
			j = n
		default:
			return field{}, 0, false
		}
	}
}

// blocksAt returns the blocks of body between each pair of bounds (start,
// end, start, end, ...) and their hashes.
func blocksAt(body []byte, bounds []int) ([]BlockHash, [][]byte) {
	refs, data := make([]BlockHash, len(bounds)/2), make([][]byte, len(bounds)/2)
	for k := range refs {
		data[k] = body[bounds[2*k]:bounds[2*k+1]]
		refs[k] = HashBlock(data[k])
	}
	return refs, data
}

// splitGJSON is splitBody with gjson, for the bodies splitFast leaves.
func splitGJSON(body []byte, keys map[string]bool, prompt []int32) (split, bool) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return split{}, false
	}
	var s split
	prev := 0
	seen := map[string]bool{}
	// Parse a view of body rather than a copy (gjson.ParseBytes copies the
	// whole request): every span kept below is re-sliced from body, and the
	// only string kept, the field's key, is cloned.
	gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body))).ForEach(func(k, v gjson.Result) bool {
		if seen[k.Str] {
			return true
		}
		key, v, isIDs := promptIDsAt(k.Str, v, prompt)
		if !keys[key] && !isIDs {
			return true
		}
		start, end := v.Index, v.Index+len(v.Raw)
		if start < prev || end > len(body) || string(body[start:end]) != v.Raw {
			return true // position unknown: leave the value in the skeleton
		}
		f, ok := field{ids: true}, isIDs
		if !isIDs {
			f, ok = cutField(body[start:end], v)
		}
		if !ok {
			return true
		}
		seen[k.Str] = true
		f.key = strings.Clone(key)
		s.skeleton = append(s.skeleton, body[prev:start]...)
		f.hole = len(s.skeleton)
		s.fields = append(s.fields, f)
		prev = end
		return true
	})
	if len(s.fields) == 0 {
		return split{}, false
	}
	s.skeleton = append(s.skeleton, body[prev:]...)
	return s, true
}

// cutField turns one value into a field, or reports false when it is too
// small to be worth a block.
func cutField(span []byte, v gjson.Result) (field, bool) {
	if v.IsArray() {
		if f, ok := cutArray(span, v); ok {
			return f, true
		}
	} else if len(span) < minWholeBlock {
		return field{}, false
	}
	if len(span) == 0 {
		return field{}, false
	}
	return field{whole: true, refs: []BlockHash{HashBlock(span)}, data: [][]byte{span}}, true
}

// cutArray splits an array value into element blocks. It reports false for
// empty arrays and for arrays whose separators differ (rare hand-formatted
// JSON), which are kept as one whole block instead.
func cutArray(span []byte, v gjson.Result) (field, bool) {
	base := v.Index
	var f field
	pos := 1 // just after '['
	ok := true
	v.ForEach(func(_, el gjson.Result) bool {
		s := el.Index - base
		e := s + len(el.Raw)
		if s < pos || e > len(span) || string(span[s:e]) != el.Raw {
			ok = false
			return false
		}
		gap := span[pos:s]
		if len(f.refs) == 0 {
			f.lead = gap
		} else if len(f.refs) == 1 {
			f.sep = gap
		} else if !bytes.Equal(gap, f.sep) {
			ok = false
			return false
		}
		f.refs = append(f.refs, HashBlock(span[s:e]))
		f.data = append(f.data, span[s:e])
		pos = e
		return true
	})
	if !ok || len(f.refs) == 0 || pos > len(span)-1 {
		return field{}, false
	}
	f.trail = span[pos : len(span)-1]
	if !rebuilds(f, span) {
		return field{}, false
	}
	return f, true
}

// rebuilds reports whether joinArray(nil, f, f.data) equals span, without
// building it: this runs for every array of every recorded request.
func rebuilds(f field, span []byte) bool {
	rest, ok := cutPrefix(span, openBracket)
	if ok {
		rest, ok = cutPrefix(rest, f.lead)
	}
	for i, e := range f.data {
		if !ok {
			return false
		}
		if i > 0 {
			if rest, ok = cutPrefix(rest, f.sep); !ok {
				return false
			}
		}
		rest, ok = cutPrefix(rest, e)
	}
	if ok {
		rest, ok = cutPrefix(rest, f.trail)
	}
	return ok && string(rest) == "]"
}

var openBracket = []byte("[")

// cutPrefix takes p as bytes: a string(e) argument cost an allocation per
// array element, half the allocations of encoding a call.
func cutPrefix(b, p []byte) ([]byte, bool) {
	if !bytes.HasPrefix(b, p) {
		return b, false
	}
	return b[len(p):], true
}

// joinArray appends the array value of f, with elems as its elements.
func joinArray(dst []byte, f field, elems [][]byte) []byte {
	dst = append(dst, '[')
	dst = append(dst, f.lead...)
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, f.sep...)
		}
		dst = append(dst, e...)
	}
	dst = append(dst, f.trail...)
	return append(dst, ']')
}
