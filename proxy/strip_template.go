package proxy

import (
	"slices"

	"github.com/orchard-rl/orchard/internal/jsonscan"
	"github.com/orchard-rl/orchard/proxy/assemble"
)

// stripTemplate lets the stripper skip the field lookups for a chunk that
// repeats the previous one except in the values it nulls (vLLM's token_ids
// and logprobs change every chunk; id, model, keys and the rest do not).
// It keeps the last chunk stripped by lookup, the value spans that were
// nulled and its string values (holes). A chunk equal to it outside the holes, with a valid value
// of the same kind in each, has the injected fields at the same places, so
// it is stripped by copying it with null in the holes: the same bytes the
// lookups would produce (TestStripTemplate compares the two).
//
// Only a chunk that is valid JSON and needs no key deletion (SGLang, OpenAI's
// usage:null) and is not dropped becomes a template.
type stripTemplate struct {
	ok    bool
	data  []byte
	holes []stripHole // sorted, disjoint value spans of data
	// spans: the hole values' extents in the chunk apply last matched (the
	// assembler takes their ends from here instead of skipping them).
	spans []assemble.Span
}

// stripHole is a value span of the template: nulled (an injected field) or
// passed through (a string value, which may differ chunk to chunk: the
// text deltas). Strings are atoms, so whatever they hold, the lookups find
// the same fields in the same places.
type stripHole struct {
	start, end int
	null       bool
}

// keep makes data, stripped with edits, the template if it can be one.
func (t *stripTemplate) keep(data []byte, edits []edit) {
	t.ok = false
	t.holes = t.holes[:0]
	for _, e := range edits {
		if e.at < 0 {
			return // a deletion
		}
		t.holes = append(t.holes, stripHole{start: e.at, end: e.at + e.n, null: true})
	}
	if !jsonscan.Valid(data) {
		return
	}
	slices.SortFunc(t.holes, func(a, b stripHole) int { return a.start - b.start })
	last := 0
	for _, h := range t.holes {
		if h.start < last {
			return // overlapping edits: appendEdited skips one; do not guess
		}
		last = h.end
	}
	// The string values outside the nulled spans pass through.
	nulls := len(t.holes)
	j := 0
	jsonscan.StringValues(data, func(start, end int) {
		for j < nulls && t.holes[j].end <= start {
			j++
		}
		if j < nulls && t.holes[j].start < end {
			return // inside a nulled value
		}
		t.holes = append(t.holes, stripHole{start: start, end: end})
	})
	slices.SortFunc(t.holes, func(a, b stripHole) int { return a.start - b.start })
	t.data = append(t.data[:0], data...)
	t.ok = true
}

// apply appends data, stripped, to dst if data matches the template; it
// reports false (and dst's contents past its length are garbage) otherwise.
func (t *stripTemplate) apply(dst, data []byte) ([]byte, bool) {
	if !t.ok {
		return dst, false
	}
	at, from := 0, 0
	t.spans = t.spans[:0]
	for _, h := range t.holes {
		seg := t.data[from:h.start]
		if len(data)-at < len(seg) || string(data[at:at+len(seg)]) != string(seg) {
			return dst, false
		}
		at += len(seg)
		if at >= len(data) || !jsonscan.SameKind(data[at], t.data[h.start]) {
			return dst, false
		}
		k := len(t.spans)
		t.spans = append(t.spans, assemble.Span{})
		var end int
		var ok bool
		if h.null {
			// A nulled object (logprobs): its entries' extents, found in the
			// same scan, spare the assembler's walk finding their ends.
			end, ok, t.spans = jsonscan.ValidValueElems(data, at, t.spans)
		} else {
			end, ok = jsonscan.ValidValue(data, at)
		}
		if !ok {
			return dst, false
		}
		t.spans[k] = assemble.Span{Start: at, End: end}
		dst = append(dst, seg...)
		if h.null {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, data[at:end]...)
		}
		at, from = end, h.end
	}
	if string(data[at:]) != string(t.data[from:]) {
		return dst, false
	}
	return append(dst, data[at:]...), true
}
