package lineage

import "unsafe"

// Estimated costs, in bytes, of what an episode keeps besides the units of
// its thread tips. They are rough on purpose: the budget is about the
// units, which dominate for agent episodes (a 30,000-token tip is 120 KB of
// ids while a call's record and index entries are ~200 bytes).
const (
	episodeOverhead = 1024 // the episode, its maps and spaces when empty
	callOverhead    = 200  // a callRec with its lineage, its id (call_ + 32 hex digits) and byID entry
	entryOverhead   = 24   // one entry of a hash index (prompts, fulls, memo, respIDs)
	tipOverhead     = 96   // a tip without its units and checkpoints
)

// bytesLocked estimates the memory of e's state.
func (e *episode) bytesLocked() int64 {
	n := int64(episodeOverhead) + int64(len(e.calls))*callOverhead + int64(len(e.respIDs))*entryOverhead
	n += e.tok.bytes() + e.text.bytes()
	for _, s := range e.msg {
		n += s.bytes()
	}
	return n
}

// bytes estimates the memory of s: its tips' units and checkpoints, and
// its index entries.
func (s *space[E]) bytes() int64 {
	unit := int64(unsafe.Sizeof(*new(E)))
	n := int64(len(s.prompts)+len(s.fulls)+len(s.memo))*entryOverhead + int64(len(s.lens))*8
	for _, t := range s.tips {
		if t != nil {
			n += tipOverhead + int64(cap(t.units))*unit + int64(cap(t.cps))*8
		}
	}
	return n
}
