package assemble

import (
	"slices"
	"sync"
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
//
// The proxy's stripper nulls the token ids and logprobs it injected by
// looking them up in each chunk. When those values are holes of the
// template (markStrip), a chunk that matches is stripped by nulling the
// same holes: its bytes outside the holes are the template's and each hole
// holds a value of the same kind, so the lookups would find the same
// members in the same places, non-null, and null exactly those values.
// TestStripTemplate and FuzzStripperReplay compare it with the lookups.
type template struct {
	off   bool // never replay (tests compare against the full parse)
	ok    bool
	data  []byte // the chunk, copied
	holes []hole
	got   []foundVal // scratch: per hole, where match found its value (see value, elemsOf)
	// strips: markStrip found every value the caller strips from the
	// template chunk to be a hole, so a chunk that matches is stripped by
	// nulling those holes (see Streamer.ReplayStripped); nulls: their
	// indices, in order.
	strips bool
	nulls  []int
	own    []jsonscan.Elem // scratch: the elements of every hole's value
	// shapes: the skeletons of the template's logprobs holes (see
	// jsonscan.Shape), with the elements ValidValueElems found in each,
	// at offsets in the hole's value; nShapes of them are in use.
	shapes  []holeShape
	nShapes int
	ends    []jsonscan.Span // scratch: the slot extents a shape matched
	// prog: the steps match takes (see program); fused: the shapes' slots
	// are steps of their own.
	prog  []step
	fused bool
}

// holeShape is a logprobs hole's skeleton: a chunk's new logprobs object
// that matches it is checked by comparing the fixed bytes and scanning the
// token, logprob and bytes values, and its entries are where the
// template's were, moved by the values' change in length.
type holeShape struct {
	s     jsonscan.Shape
	elems []jsonscan.Elem
	// plan: per element, the list of sampled-token logprobs it is in
	// (see valuesPlan); empty when the shape has none.
	plan []listKind
	// slots: per element of plan, the shape's slot that holds the value
	// addPlanned reads there (a content entry's "logprob" member, a
	// token_logprobs number), noMember for a content entry without one, or
	// unread for an element of neither list; empty unless every element
	// has one. A match hands addPlanned those slots' extents instead of
	// moving each element's (see matchShape).
	slots []int32
}

const (
	noMember int32 = -1
	unread   int32 = -2
)

// holeElems are the elements of a hole value's array members (a logprobs
// object's entries, with their "logprob" members) and the value's offset in
// the chunk: their extents are offsets in the chunk too.
type holeElems struct {
	spans []jsonscan.Elem
	base  int
	plan  []listKind // the shape's, when the value matched one
}

// foundVal is where match found a hole's value in the chunk it matched,
// and which of t.own are the elements it found inside the value. It holds
// offsets, not slices: match notes one per hole of every chunk, and
// noting offsets costs a few stores where slices cost a dozen, with the
// GC's write barriers; value and elemsOf make the slices for the holes
// that are read.
type foundVal struct {
	start, end int  // the value's extent in the chunk
	lo, hi     int  // its elements: t.own[lo:hi]
	planned    bool // it matched its hole's shape, whose plan it follows
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
	shape      int // holeLogprobs: 1 + its index in template.shapes; 0: none
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

// templates recycles finished streams' templates: the copy of a chunk each
// keeps (a vLLM stream's first chunk carries the whole prompt's ids) and its
// hole bookkeeping were allocated anew for every stream.
var templates = sync.Pool{New: func() any { return new(template) }}

// maxRecycled is the largest chunk copy a template is recycled with: a
// larger one (a long prompt's ids) goes to the GC rather than stay pooled.
const maxRecycled = 64 << 10

func newTemplate() *template { return templates.Get().(*template) }

// recycle hands t's memory to a later stream and returns an empty template
// for t's owner, should it see another chunk. Nothing t held may be used
// after: the holes' choices, the values of the chunk last matched.
func (t *template) recycle() *template {
	empty := &template{off: t.off}
	if cap(t.data) > maxRecycled {
		return empty
	}
	clear(t.holes[:cap(t.holes)])
	// The shapes alias data, which goes with them; keep rebuilds them.
	*t = template{data: t.data[:0], holes: t.holes[:0], got: t.got[:0],
		own: t.own[:0], shapes: t.shapes, ends: t.ends[:0], prog: t.prog[:0], nulls: t.nulls[:0]}
	templates.Put(t)
	return empty
}

func (t *template) reset() {
	t.ok, t.strips = false, false
	t.holes = t.holes[:0]
}

// keep makes the chunk just parsed the template.
func (t *template) keep(data []byte) {
	t.data = append(t.data[:0], data...)
	t.strips = false
	t.nShapes = 0
	for i := range t.holes {
		if h := &t.holes[i]; h.kind == holeLogprobs && t.shapeOf(t.data[h.start:h.end]) {
			h.shape = t.nShapes
		}
	}
	t.program(true)
}

// shapeOf adds the shape of a logprobs hole's value v, which the shapes
// alias, and reports whether v has one.
func (t *template) shapeOf(v []byte) bool {
	if t.nShapes == len(t.shapes) {
		t.shapes = append(t.shapes, holeShape{})
	}
	sh := &t.shapes[t.nShapes]
	if !sh.s.Build(v) {
		return false
	}
	var ok bool
	if _, ok, sh.elems = jsonscan.ValidValueElems(v, 0, "logprob", sh.elems[:0]); !ok {
		return false
	}
	if sh.plan, ok = valuesPlan(v, sh.plan[:0]); !ok || len(sh.plan) != len(sh.elems) {
		sh.plan = sh.plan[:0]
	}
	sh.slots = planSlots(sh, sh.slots[:0])
	t.nShapes++
	return true
}

// planSlots appends, for each element of sh's plan, the slot addPlanned
// reads there (see holeShape.slots), or nothing unless every element has
// one.
func planSlots(sh *holeShape, slots []int32) []int32 {
	if len(sh.plan) == 0 {
		return slots
	}
	for k, e := range sh.elems {
		slot := unread
		switch sh.plan[k] {
		case contentList:
			switch e.Member {
			case jsonscan.Unknown:
				return slots[:0]
			case jsonscan.Span{}:
				slot = noMember
			default:
				if slot = int32(sh.s.Slot(e.Member)); slot < 0 {
					return slots[:0]
				}
			}
		case tokenLogprobsList:
			if slot = int32(sh.s.Slot(e.Span)); slot < 0 {
				return slots[:0]
			}
		}
		slots = append(slots, slot)
	}
	return slots
}

// listKind says which list of sampled-token logprobs an element of a
// logprobs object's array member is in: a chat choice's "content", a
// completions choice's "token_logprobs", or neither.
type listKind uint8

const (
	otherList listKind = iota
	contentList
	tokenLogprobsList
)

// valuesPlan appends, for each element of the array members of the valid
// logprobs object v, in order (ValidValueElems's), the list it is in, as
// logprobs.add tells them by their member's key. ok is false when a key
// has an escape: add compares keys unescaped.
func valuesPlan(v []byte, plan []listKind) ([]listKind, bool) {
	for i := 1; ; {
		i = jsonscan.SkipSpace(v, i)
		if i < len(v) && v[i] == ',' {
			i = jsonscan.SkipSpace(v, i+1)
		}
		if i >= len(v) || v[i] == '}' {
			return plan, true
		}
		ke := jsonscan.SkipString(v, i)
		key := v[i+1 : ke-1]
		if slices.Contains(key, '\\') {
			return plan, false
		}
		i = jsonscan.SkipSpace(v, jsonscan.SkipSpace(v, ke)+1)
		if v[i] != '[' {
			i = jsonscan.SkipValue(v, i)
			continue
		}
		kind := otherList
		switch string(key) {
		case "content":
			kind = contentList
		case "token_logprobs":
			kind = tokenLogprobsList
		}
		for i = jsonscan.SkipSpace(v, i+1); v[i] != ']'; {
			plan = append(plan, kind)
			if i = jsonscan.SkipSpace(v, jsonscan.SkipValue(v, i)); v[i] == ',' {
				i = jsonscan.SkipSpace(v, i+1)
			}
		}
		i++
	}
}

// matchShape is ValidValueElems for a logprobs hole's value at data[at]
// through the hole's shape: it appends the value's elements to t.own and
// reports where the value ends, or false (appending nothing) when the value
// does not match the shape, which leaves it to ValidValueElems. planned
// says the hole's choice keeps only the logprob values (addPlanned): the
// elements then carry only the extents of those values (see slotElems).
func (t *template) matchShape(sh *holeShape, data []byte, at int, planned bool) (int, bool) {
	end, ok, ends := sh.s.Match(data, at, t.ends[:0])
	t.ends = ends
	if !ok {
		return at, false
	}
	t.shapeElems(sh, at, ends, planned)
	return end, true
}

// shapeElems appends to t.own the elements of a value at data[at] that
// matched sh with the slot extents ends: the extents of sh's elements moved
// by the slots' change in length, or, when planned, only what addPlanned
// reads (see slotElems).
func (t *template) shapeElems(sh *holeShape, at int, ends []jsonscan.Span, planned bool) {
	if planned && len(sh.slots) > 0 {
		t.slotElems(sh, ends)
		return
	}
	mv := sh.s.Mover(at, ends) // the elements and their members come in order
	for _, e := range sh.elems {
		start, m := mv.At(e.Start), e.Member
		if m.Start > 0 { // not the zero Span or Unknown: a member found
			m = jsonscan.Span{Start: mv.At(m.Start), End: mv.At(m.End)}
		}
		t.own = append(t.own, jsonscan.Elem{Span: jsonscan.Span{Start: start, End: mv.At(e.End)}, Member: m})
	}
}

// slotElems appends to t.own, for each element of sh's plan, what
// addPlanned reads of it: the extent of the value in its slot, as both the
// element's extent and its member's (the zero Span for a content entry
// without a "logprob" member). The elements' own extents are not found:
// only addPlanned may read them.
func (t *template) slotElems(sh *holeShape, ends []jsonscan.Span) {
	for _, k := range sh.slots {
		var e jsonscan.Elem
		if k >= 0 {
			e = jsonscan.Elem{Span: ends[k], Member: ends[k]}
		}
		t.own = append(t.own, e)
	}
}

// markStrip marks the holes of the template at the given value extents as
// stripped and reports whether every extent is a hole, which data (the
// chunk the extents are of) must be the template for. Extents that are
// not all holes leave the template unable to strip.
func (t *template) markStrip(data []byte, spans []Span) bool {
	t.strips, t.nulls = false, t.nulls[:0]
	if !t.ok || string(data) != string(t.data) {
		return false
	}
	for _, sp := range spans {
		i := slices.IndexFunc(t.holes, func(h hole) bool { return h.start == sp.Start && h.end == sp.End })
		if i < 0 {
			return false
		}
		t.nulls = append(t.nulls, i)
	}
	// A full parse notes holes in document order; replayStripped copies
	// the chunk between them in that order.
	slices.Sort(t.nulls)
	t.nulls = slices.Compact(t.nulls)
	for k := 1; k < len(t.nulls); k++ {
		if t.holes[t.nulls[k]].start < t.holes[t.nulls[k-1]].end {
			return false
		}
	}
	t.strips = true
	return true
}

// replayStripped is replay that also appends data to dst with the holes
// markStrip marked nulled; it declines any chunk unless markStrip accepted
// the template.
func (t *template) replayStripped(dst, data []byte) ([]byte, bool) {
	if !t.strips || !t.replay(data) {
		return dst, false
	}
	last := 0
	for _, i := range t.nulls {
		f := &t.got[i]
		dst = append(dst, data[last:f.start]...)
		dst = append(dst, "null"...)
		last = f.end
	}
	return append(dst, data[last:]...), true
}

// replay applies data through the template if it matches, and reports
// whether it did.
func (t *template) replay(data []byte) bool {
	if t.off || !t.ok || !t.match(data) && !t.unfused(data) {
		return false
	}
	group, nIDs, nLP := -1, -1, -1
	var ch *choice
	for i := range t.holes {
		h := &t.holes[i]
		if h.group != group {
			if ch != nil {
				ch.checkCounts(nIDs, nLP)
			}
			group, ch, nIDs, nLP = h.group, h.ch, -1, -1
		}
		v := t.value(i, data)
		switch h.kind {
		case holeText:
			h.ch.deltaText(h.key, v)
		case holeCompletion:
			h.ch.completionText(v)
		case holeArgs:
			h.tool.addArgs(v)
		case holeIDs:
			nIDs = h.ch.moreIDs(v)
		case holeLogprobs:
			nLP = h.ch.lp.addKnown(v, h.ch.c.chat, t.elemsOf(i))
		}
	}
	if ch != nil {
		ch.checkCounts(nIDs, nLP)
	}
	return true
}

// unfused is match after a fused program declined data: it goes on with
// the unfused program, which matches each logprobs value against its shape
// or, where that fails (a completions choice's top_logprobs, whose keys
// change every token), validates it whole, until the next template. A
// chunk declined either way is parsed in full and becomes the next
// template.
func (t *template) unfused(data []byte) bool {
	if !t.fused {
		return false
	}
	t.program(false)
	return t.match(data)
}

// found notes data[start:end] as hole k's value, with the elements match
// appended to t.own from lo on; planned: the value matched the hole's
// shape, which has a plan.
func (t *template) found(k, start, end, lo int, planned bool) {
	t.got[k] = foundVal{start: start, end: end, lo: lo, hi: len(t.own), planned: planned}
}

// value returns hole k's value in data, the chunk match last matched.
func (t *template) value(k int, data []byte) val {
	f := &t.got[k]
	return val{raw: data[f.start:f.end], Type: jsonscan.TypeOf(data[f.start])}
}

// elemsOf returns the elements match found in hole k's value. Capped, so
// that an append cannot write past them.
func (t *template) elemsOf(k int) holeElems {
	f := &t.got[k]
	e := holeElems{spans: t.own[f.lo:f.hi:f.hi], base: f.start}
	if f.planned {
		e.plan = t.shapes[t.holes[k].shape-1].plan
	}
	return e
}

// A step of a template's program is a value between fixed bytes: a hole's
// whole value, or one slot of the shape of a logprobs hole. The program
// lists them in the order of the chunk, so that matching compares the
// fixed bytes before each step and validates its value, in one loop over
// the chunk. A fused program has a logprobs hole's shape slots as steps of
// their own: the hole's fixed bytes are compared with the bytes around it,
// and its slots validated as its shape's Match validates them. Otherwise
// the hole is one step, matched against its shape by Match.
type step struct {
	start, end int // the value's extent in t.data
	hole       int
	kind       byte // the first byte of the template's value there
	slot       slotMark
}

// slotMark says what a step's value is: a hole's whole value, matched
// against its shape or not, or a slot of its hole's shape, and which.
type slotMark uint8

const (
	wholeHole slotMark = 0
	shapeHole slotMark = 1 // a logprobs hole, matched against its shape
	inShape   slotMark = 2
	firstSlot slotMark = 4 // the hole's first slot
	lastSlot  slotMark = 8 // the hole's last slot
)

// program makes t's program from its holes and their shapes, fused where
// fused is asked and a shape has slots, and sizes the scratch a match fills
// per hole.
func (t *template) program(fused bool) {
	n := len(t.holes)
	if cap(t.got) < n {
		t.got = make([]foundVal, n)
	}
	t.got = t.got[:n]
	t.prog, t.fused = t.prog[:0], false
	for k := range t.holes {
		h := &t.holes[k]
		whole := step{start: h.start, end: h.end, hole: k, kind: t.data[h.start]}
		var slots []jsonscan.Span
		var kinds []byte
		if h.shape > 0 {
			whole.slot = shapeHole
			slots, kinds = t.shapes[h.shape-1].s.Slots()
		}
		if !fused || len(slots) == 0 {
			t.prog = append(t.prog, whole)
			continue
		}
		t.fused = true
		for j, sl := range slots {
			st := step{start: h.start + sl.Start, end: h.start + sl.End, hole: k, kind: kinds[j], slot: inShape}
			if j == 0 {
				st.slot |= firstSlot
			}
			if j == len(slots)-1 {
				st.slot |= lastSlot
			}
			t.prog = append(t.prog, st)
		}
	}
}

// match reports whether data equals the template outside its holes, with a
// strictly valid value of the same kind in each, and collects those values
// and the extents of their array members' elements (a logprobs object's
// entries), found in the same scan of t's program. Where a fused program
// matches, the unfused one would have found the same values and elements
// (TestProgramEqualsHoles): the bytes compared are the same (a logprobs
// hole's fixed bytes are the template's, where its shape's skeleton is),
// each slot is validated as Shape.Match validates it, and the hole's value
// and elements are made from the slots' extents as matchShape makes them.
func (t *template) match(data []byte) bool {
	t.own, t.ends = t.own[:0], t.ends[:0]
	at, from := 0, 0      // positions in data and in t.data
	holeAt, slot0 := 0, 0 // the shape hole being matched: its start in data, its first slot in t.ends
	for i := range t.prog {
		st := &t.prog[i]
		seg := t.data[from:st.start]
		if !jsonscan.HasAt(data, at, seg) {
			return false
		}
		at += len(seg)
		end, ok := 0, false
		if st.slot&inShape == 0 { // the hole's whole value
			if at >= len(data) || !jsonscan.SameKind(data[at], st.kind) {
				return false
			}
			lo := len(t.own)
			planned := false
			if st.slot == shapeHole {
				h := &t.holes[st.hole]
				sh := &t.shapes[h.shape-1]
				end, ok = t.matchShape(sh, data, at, h.ch.lp.valuesOnly)
				planned = ok && len(sh.plan) > 0
			}
			if !ok && st.kind != '{' { // a text or a list of ids: no elements to find
				end, ok = jsonscan.SlotValue(data, at, st.kind)
			}
			if !ok { // what the shape or the slot check declined: the general walk
				if end, ok, t.own = jsonscan.ValidValueElems(data, at, "logprob", t.own); !ok {
					return false
				}
			}
			t.found(st.hole, at, end, lo, planned)
			at, from = end, st.end
			continue
		}
		if st.slot&firstSlot != 0 {
			holeAt, slot0 = at-(st.start-t.holes[st.hole].start), len(t.ends)
		}
		if end, ok = jsonscan.SlotValue(data, at, st.kind); !ok {
			return false
		}
		t.ends = append(t.ends, jsonscan.Span{Start: at, End: end})
		if st.slot&lastSlot != 0 {
			// The hole's bytes after its last slot are compared with the
			// next step's (or the chunk's last) fixed bytes.
			h := &t.holes[st.hole]
			holeEnd := end + h.end - st.end
			if holeEnd > len(data) {
				return false
			}
			sh := &t.shapes[h.shape-1]
			lo := len(t.own)
			t.shapeElems(sh, holeAt, t.ends[slot0:], h.ch.lp.valuesOnly)
			t.found(st.hole, holeAt, holeEnd, lo, len(sh.plan) > 0)
		}
		at, from = end, st.end
	}
	return string(data[at:]) == string(t.data[from:])
}
