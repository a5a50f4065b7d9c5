package assemble

import (
	"unsafe"

	"github.com/orchard-rl/orchard/internal/jsonscan"
)

// A stream's chunks mostly repeat the previous chunk byte for byte except
// for the values they append: the text delta, the tool-call argument
// fragment, the token ids, the logprobs. template keeps the last chunk that
// was parsed in full with the places of those values (holes), and a chunk
// that equals it outside the holes is applied by running only the hole
// members' code on the new values. Everything else a chunk does (merging
// id, model, finish_reason, ...) is idempotent, so repeating the same bytes
// would change nothing. That makes most chunks cost a compare and a scan of
// their new values instead of a parse.
//
// Why it is exact: the bytes between holes are equal, each new hole value
// is a valid JSON value whose first byte is of the same kind as the old
// one, so the new chunk is valid and has the same members in the same
// places; the hole members run the same methods the full parse runs. A
// chunk whose full parse did anything that is not idempotent and not a
// hole (an SGLang sglext, a tool name fragment, an error) does not become
// a template, nor does one that is not strictly valid JSON.
// TestTemplateEqualsFullParse compares the two paths on generated streams.
type template struct {
	off   bool // never replay (tests compare against the full parse)
	ok    bool
	data  []byte // the chunk, copied
	holes []hole
	vals  []val       // scratch: the hole values of the chunk being matched
	elems []holeElems // scratch: per hole, the caller's spans inside its value
	// spans: known extents of values of the valid chunk being matched
	// (see Streamer.EventSpans), or nil.
	spans []Span
}

// holeElems are the spans inside a hole's value (a logprobs object's
// entries) and the value's offset in the chunk, which they are relative to.
type holeElems struct {
	spans []Span
	base  int
}

type holeKind uint8

const (
	holeText       holeKind = iota // a delta's content/reasoning/refusal string
	holeCompletion                 // a completions choice's text
	holeArgs                       // a tool call's arguments fragment
	holeIDs                        // a choice's token_ids
	holeLogprobs                   // a choice's logprobs object
)

type hole struct {
	start, end int
	kind       holeKind
	group      int // which choice object of the chunk holds it
	ch         *choice
	key        string // holeText: the text key
	tool       *toolCall
}

// note records, during a full parse, that v (a member value of c.cur) is a
// hole of the given kind.
func (c *choices) note(kind holeKind, v val, ch *choice, key string, t *toolCall) {
	if !c.tpl.ok || len(v.raw) == 0 {
		return
	}
	start := int(uintptr(unsafe.Pointer(unsafe.SliceData(v.raw))) - uintptr(unsafe.Pointer(unsafe.SliceData(c.cur))))
	c.tpl.holes = append(c.tpl.holes, hole{start: start, end: start + len(v.raw), kind: kind,
		group: c.group, ch: ch, key: key, tool: t})
}

// noTemplate marks the chunk being parsed as unfit to be a template.
func (c *choices) noTemplate() { c.tpl.ok = false }

func (t *template) reset() {
	t.ok = false
	t.holes = t.holes[:0]
}

// keep makes the chunk just parsed the template.
func (t *template) keep(data []byte) { t.data = append(t.data[:0], data...) }

// replay applies data through the template if it matches, and reports
// whether it did. valid says data is known strictly valid JSON.
func (t *template) replay(data []byte, valid bool) bool {
	if t.off || !t.ok || !t.match(data, valid) {
		return false
	}
	group, nIDs, nLP := -1, -1, -1
	var ch *choice
	for i, h := range t.holes {
		if h.group != group {
			if ch != nil {
				ch.checkCounts(nIDs, nLP)
			}
			group, ch, nIDs, nLP = h.group, h.ch, -1, -1
		}
		v := t.vals[i]
		switch h.kind {
		case holeText:
			h.ch.deltaText(h.key, v)
		case holeCompletion:
			h.ch.completionText(v)
		case holeArgs:
			h.tool.addArgs(v)
		case holeIDs:
			nIDs = h.ch.addIDs(v)
		case holeLogprobs:
			nLP = h.ch.lp.addKnown(v, h.ch.c.chat, t.elems[i])
		}
	}
	if ch != nil {
		ch.checkCounts(nIDs, nLP)
	}
	return true
}

// match reports whether data equals the template outside its holes, with a
// valid value of the same kind in each, and collects those values. When
// data is known strictly valid (valid), a hole's value is only skipped, not
// validated: each hole then starts a value of a valid document (the bytes
// before it parse as the template's do), so skipping finds its exact end.
func (t *template) match(data []byte, valid bool) bool {
	t.vals, t.elems = t.vals[:0], t.elems[:0]
	at, from := 0, 0 // positions in data and in t.data
	spans, k := t.spans, 0
	for _, h := range t.holes {
		seg := t.data[from:h.start]
		if len(data)-at < len(seg) || string(data[at:at+len(seg)]) != string(seg) {
			return false
		}
		at += len(seg)
		if at >= len(data) || !jsonscan.SameKind(data[at], t.data[h.start]) {
			return false
		}
		var end int
		var elems []Span
		if valid {
			for k < len(spans) && spans[k].Start < at {
				k++
			}
			if k < len(spans) && spans[k].Start == at {
				end = spans[k].End // a valid value's extent, found by the caller
				lo := k + 1
				for k++; k < len(spans) && spans[k].Start < end; k++ {
				}
				elems = spans[lo:k]
			} else {
				end = jsonscan.SkipValue(data, at)
			}
		} else {
			var ok bool
			if end, ok = jsonscan.ValidValue(data, at); !ok {
				return false
			}
		}
		t.vals = append(t.vals, val{raw: data[at:end], Type: jsonscan.TypeOf(data[at])})
		t.elems = append(t.elems, holeElems{elems, at})
		at, from = end, h.end
	}
	return string(data[at:]) == string(t.data[from:])
}
