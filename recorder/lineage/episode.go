package lineage

import (
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

// Thresholds of the classification; docs/token-fidelity.md states them.
const (
	// boundaryWindow is how many ids at the end of the parent's
	// prompt+completion a divergence may start within to count as a
	// re-tokenised boundary rather than a re-rendered turn.
	boundaryWindow = 4
	// keepRatio: a prompt that keeps less than this fraction of its best
	// match's history is a new thread or a compaction, not an edit.
	keepRatio = 0.5
	// compactRatio: a compaction is at most this fraction of the size of
	// the thread it replaces.
	compactRatio = 0.5
	// minSharedPrefix stands in for the system prefix where units are not
	// messages (token ids without a usable request, completions text): a
	// compaction must keep at least this many leading units.
	minSharedPrefix = 16
)

// view is one space seen through the current call, whatever its unit type.
type view interface {
	scanned() match
	promptLen() int
	inputSize() int64
	hasTips() bool
	// tipLCP is the common prefix of the current prompt with thread's tip,
	// if that tip is call.
	tipLCP(call, thread int32) (int, bool)
	tipFacts(thread int32) (t tipFacts, ok bool)
	best() (thread int32, lcp int, ok bool)
	// retainedIn is the fraction of thread's tip history (after the
	// system prefix, or with after, after the common prefix j) that the
	// current prompt keeps.
	retainedIn(thread int32, j int, after bool) float64
	isStructured() bool
	commit(ci, thread int32, tick int64)
	drop(thread int32)
}

type tipFacts struct {
	call      int32
	fullLen   int
	promptLen int
	sys       int
	size      int64
}

type callRec struct {
	id     string
	thread int32
	tok    bool // the call had token ids
	lin    recorder.Lineage
}

// episode is the lineage state of one episode. Its size is O(calls) small
// records and index entries plus the units of each thread's tip.
type episode struct {
	id   string
	size int64 // bytes accounted for it in its Tracker; guarded by Tracker.mu

	mu      sync.Mutex // guards following
	calls   []callRec
	threads []int32 // tip call of each thread
	tok     *space[int32]
	msg     map[recorder.API]*space[uint64]
	text    *space[byte]
	respIDs map[string]int32 // responses API response id -> call
	byID    map[string]int32 // call id -> call
	tokIn   seqInput[int32]
	msgIn   seqInput[uint64]
	textIn  seqInput[byte]
	scratch []uint64
}

func newEpisode(id string) *episode {
	return &episode{
		id:      id,
		tok:     newSpace[int32](false),
		msg:     make(map[recorder.API]*space[uint64]),
		text:    newSpace[byte](false),
		respIDs: make(map[string]int32),
		byID:    make(map[string]int32),
	}
}

// decision is how the current call relates to the earlier ones.
type decision struct {
	kind      recorder.LineageKind
	parent    int32 // -1 for a root
	newThread bool
}

// observeLocked classifies c and records it. It reports false, recording
// nothing, for APIs that generate no conversation turn.
func (e *episode) observeLocked(c *recorder.Call) (recorder.Lineage, bool) {
	if i, ok := e.byID[c.CallID]; ok && c.CallID != "" {
		return e.calls[i].lin, true // observed before, e.g. replayed
	}
	mv, ok := e.messageView(c)
	if !ok {
		return recorder.Lineage{}, false
	}
	var tv view
	if c.Tokens != nil && len(c.Tokens.PromptIDs) > 0 {
		e.fillTokens(c.Tokens)
		e.tok.scan(&e.tokIn)
		tv = e.tok
	}
	ci := int32(len(e.calls))
	d := e.decide(ci, tv, mv)
	lin := recorder.Lineage{Kind: d.kind}
	thread := int32(0)
	switch {
	case d.parent < 0:
	case d.newThread:
		thread = int32(len(e.threads))
	default:
		thread = e.calls[d.parent].thread
	}
	if d.parent >= 0 {
		lin.ParentCallID = e.calls[d.parent].id
		lin.CommonPrefixTokens = e.prefixTokens(tv, d.parent)
		lin.CommonPrefixMsgs = prefixMsgs(mv, d.parent, e.calls[d.parent].thread)
	}
	lin.Thread = int(thread)
	if int(thread) == len(e.threads) {
		e.threads = append(e.threads, ci)
	}
	e.threads[thread] = ci
	e.calls = append(e.calls, callRec{id: c.CallID, thread: thread, tok: tv != nil, lin: lin})
	if c.CallID != "" {
		e.byID[c.CallID] = ci
	}
	e.commit(ci, thread, tv, mv)
	e.releaseTokens()
	if c.API == recorder.APIResponses && mv != nil {
		if id := respID(c.Response); id != "" {
			e.respIDs[id] = ci
		}
	}
	return lin, true
}

// decide applies the rules of docs/token-fidelity.md in order: token
// retry, token extend, message retry, message extend, then structure.
func (e *episode) decide(ci int32, tv, mv view) decision {
	if ci == 0 {
		return decision{kind: recorder.LineageRoot, parent: -1}
	}
	if tv != nil {
		m := tv.scanned()
		if m.retry >= 0 {
			return decision{kind: recorder.LineageRetry, parent: m.retry}
		}
		if m.ext >= 0 {
			return e.extend(m.ext, recorder.LineageExtend, mv)
		}
	}
	if mv != nil {
		m := mv.scanned()
		if m.retry >= 0 {
			kind := recorder.LineageRetry
			if tv != nil && e.calls[m.retry].tok {
				kind = recorder.LineageTemplateRewrite // same messages, other ids
			}
			return decision{kind: kind, parent: m.retry}
		}
		if m.ext >= 0 {
			return e.extend(m.ext, e.drift(tv, m.ext), mv)
		}
	}
	return e.structure(ci, tv, mv)
}

// extend continues parent's thread. When the thread has moved past
// parent, the call is either an edit of the thread (most of what the tip
// has after the common prefix is still there) or a branch from parent.
func (e *episode) extend(parent int32, kind recorder.LineageKind, mv view) decision {
	thread := e.calls[parent].thread
	tip := e.threads[thread]
	if tip == parent {
		return decision{kind: kind, parent: parent}
	}
	if mv != nil && mv.isStructured() {
		if j, ok := mv.tipLCP(tip, thread); ok && mv.retainedIn(thread, j, true) >= keepRatio {
			return decision{kind: recorder.LineageEdited, parent: tip}
		}
	}
	return decision{kind: recorder.LineageFork, parent: parent, newThread: true}
}

// drift tells, for a call whose messages extend parent, how its ids differ
// from parent's prompt+completion ids.
func (e *episode) drift(tv view, parent int32) recorder.LineageKind {
	if tv == nil || !e.calls[parent].tok {
		return recorder.LineageExtend
	}
	thread := e.calls[parent].thread
	k, ok := tv.tipLCP(parent, thread)
	if !ok {
		return recorder.LineageExtend
	}
	f, _ := tv.tipFacts(thread)
	if k >= f.promptLen && f.fullLen-k <= boundaryWindow {
		return recorder.LineageRetokenized
	}
	return recorder.LineageTemplateRewrite
}

// structure classifies a call that continues no earlier call: against the
// tip it shares the longest prefix with, it is compacted, a fork or edited.
func (e *episode) structure(ci int32, tv, mv view) decision {
	sv := mv
	if sv == nil || !sv.hasTips() {
		sv = tv
	}
	if sv == nil || !sv.hasTips() {
		return decision{kind: recorder.LineageFork, parent: ci - 1, newThread: true}
	}
	thread, j, _ := sv.best()
	f, _ := sv.tipFacts(thread)
	sys := f.sys
	if !sv.isStructured() {
		sys = minSharedPrefix
	}
	kept := sv.retainedIn(thread, j, false)
	newSize, oldSize := sv.inputSize(), f.size
	if tv != nil && sv != tv && e.calls[f.call].tok {
		if tf, ok := tv.tipFacts(thread); ok && tf.call == f.call {
			newSize, oldSize = int64(tv.promptLen()), tf.size
		}
	}
	switch {
	case j >= sys && kept < keepRatio && float64(newSize) <= compactRatio*float64(oldSize):
		return decision{kind: recorder.LineageCompacted, parent: f.call}
	case kept < keepRatio:
		return decision{kind: recorder.LineageFork, parent: f.call, newThread: true}
	default:
		return decision{kind: recorder.LineageEdited, parent: f.call}
	}
}

// prefixTokens is the common prefix, in ids, of the call and parent.
func (e *episode) prefixTokens(tv view, parent int32) int {
	if tv == nil || !e.calls[parent].tok {
		return 0
	}
	m := tv.scanned()
	switch parent {
	case m.retry:
		return tv.promptLen()
	case m.ext:
		return m.extLen
	}
	k, _ := tv.tipLCP(parent, e.calls[parent].thread)
	return k
}

// prefixMsgs is the number of leading messages the call shares with
// parent; the header unit (tools, system field) is not a message.
func prefixMsgs(mv view, parent, thread int32) int {
	if mv == nil || !mv.isStructured() {
		return 0
	}
	m := mv.scanned()
	j := 0
	switch parent {
	case m.retry:
		j = mv.promptLen()
	case m.ext:
		j = m.extLen
	default:
		j, _ = mv.tipLCP(parent, thread)
	}
	return max(j-1, 0)
}

func (e *episode) commit(ci, thread int32, tv, mv view) {
	tick := int64(ci)
	if tv != nil {
		tv.commit(ci, thread, tick)
	} else {
		e.tok.drop(thread)
	}
	for _, s := range e.msg {
		if view(s) != mv {
			s.drop(thread)
		}
	}
	if view(e.text) != mv {
		e.text.drop(thread)
	}
	if mv != nil {
		mv.commit(ci, thread, tick)
	}
}

// fillTokens points tokIn at t's slices without copying them; spaces only
// read an input, and releaseTokens drops the references afterwards.
func (e *episode) fillTokens(t *recorder.Tokens) {
	in := &e.tokIn
	in.prompt = t.PromptIDs
	in.promptSize = int64(len(t.PromptIDs))
	in.outs = append(in.outs[:0], t.CompletionIDs)
	in.outSize = int64(len(t.CompletionIDs))
	for _, ch := range t.Choices {
		if ch.Index != 0 {
			in.outs = append(in.outs, ch.CompletionIDs)
		}
	}
}

func (e *episode) releaseTokens() {
	in := &e.tokIn
	in.prompt = nil
	clear(in.outs)
	in.outs = in.outs[:0]
}

// messageView scans c's messages (or completions text) in the space of its
// API. It returns a nil view when c has no usable request, and false when
// c's API makes no conversation turn.
func (e *episode) messageView(c *recorder.Call) (view, bool) {
	switch c.API {
	case recorder.APIChatCompletions, recorder.APIResponses, recorder.APIMessages:
		if c.RequestRaw {
			return nil, true
		}
		s := e.msg[c.API]
		if s == nil {
			s = newSpace[uint64](true)
			s.memo = make(map[uint64]uint64)
			e.msg[c.API] = s
		}
		in := &e.msgIn
		in.reset()
		x := extractor{in: in, memo: s.memo, checked: c.Checked}
		prev, ok := x.extract(c.API, c.Request, c.Response)
		if !ok || len(in.prompt) == 0 {
			return nil, true
		}
		if prev != "" && !e.chainPrevious(s, prev) {
			return nil, true
		}
		s.scan(in)
		return s, true
	case recorder.APICompletions:
		in := &e.textIn
		in.reset()
		if c.RequestRaw || !extractText(c.Request, c.Response, in) || len(in.prompt) == 0 {
			return nil, true
		}
		e.text.scan(in)
		return e.text, true
	}
	return nil, false
}

// chainPrevious prefixes msgIn (a responses call that names
// previous_response_id) with the conversation of the call that produced
// that response, which must be the tip of its thread. It reports false
// when that call is unknown here.
func (e *episode) chainPrevious(s *space[uint64], prev string) bool {
	x, ok := e.respIDs[prev]
	if !ok {
		return false
	}
	t := s.tipOf(e.calls[x].thread)
	if t == nil || t.call != x {
		return false
	}
	in := &e.msgIn
	e.scratch = append(append(e.scratch[:0], t.units...), in.prompt[1:]...)
	in.prompt, e.scratch = e.scratch, in.prompt
	in.promptSize += t.size
	in.sys = t.sys
	return true
}

// respID returns a copy of the id of a response object.
func respID(resp []byte) string {
	return strings.Clone(gjson.Get(transient(resp), "id").Str)
}
