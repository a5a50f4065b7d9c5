package reconstruct

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
)

// Segment kinds: how a segment starts relative to its parent.
const (
	SegmentRoot      = "root"      // the first thread of an episode
	SegmentFork      = "fork"      // a new thread (subagent, side call, branch) while the parent goes on
	SegmentCompacted = "compacted" // history replaced by a summary; the parent does not go on
	SegmentEdited    = "edited"    // history changed by the harness
	SegmentRetry     = "retry"     // a retry of a call that was not its segment's last
	SegmentDrift     = "drift"     // split off at a token drift (--on-drift split)
)

// callState is one call of an episode as reconstruction sees it.
type callState struct {
	call   *recorder.Call
	els    elements
	comp   []Message // generated messages; nil when unusable
	keys   []uint64  // content keys of comp's non-empty messages
	reason string    // why the call is unusable; "" when usable
	kind   string    // lineage kind (recorded, or inferred here)
	parent int       // call this one continues or retries, or -1
	seg    *segment
	turn   int // index in seg.calls, or -1 (set by newEpisode)
	// retriedBy is the later attempt that replaced this call, or -1.
	retriedBy int
	// slotStart/slotEnd locate this call's completion in the next prompt
	// of its segment (element indices); slotEnd is -1 when not matched.
	slotStart, slotEnd int
}

// usable reports whether the call produced a completion to train on.
func (c *callState) usable() bool { return c.reason == "" }

// segment is a run of calls whose prompts extend each other.
type segment struct {
	id      int // final index, set by numberSegments
	parent  *segment
	kind    string
	calls   []int // indices of final attempts, in order
	retried []int // superseded attempts
	drift   *Drift
	dropped bool // --on-drift drop removed it
	// splitFrom marks a provisional kind: fork or compacted is decided
	// after the episode, by whether the parent went on (see resolveSplits).
	provisional bool
	lastOrder   int // order of the last call added
	firstOrder  int
}

// Drift describes a token break that ended or dropped a segment.
type Drift struct {
	Class  string `json:"class"`   // retokenized | template_rewrite | edited | ...
	CallID string `json:"call_id"` // the call whose prompt broke the token prefix
	Action string `json:"action"`  // split | drop | keep
}

// threader groups an episode's calls into segments.
type threader struct {
	calls []*callState
	segs  []*segment
	tips  map[uint64][]int // full-prompt chain hash -> calls with that prompt
	byID  map[string]int
	// ops counts the comparisons threading made (hash lookups, chain
	// probes, elements decoded, segments scanned), so that tests can
	// check it grows linearly with the episode (see linear_test.go).
	ops int
}

// newCallState reads one call; an unusable call keeps its reason.
func newCallState(c *recorder.Call) *callState {
	cs := &callState{call: c, parent: -1, retriedBy: -1, slotEnd: -1, turn: -1}
	switch {
	case !Supported(c.API):
		cs.reason = "unsupported_api"
		return cs
	case c.RequestRaw || !isJSONObject(c.Request):
		cs.reason = "request_not_json"
		return cs
	}
	cs.els = newElements(c.API, c.Request)
	switch {
	case c.Status < 200 || c.Status > 299:
		cs.reason = fmt.Sprintf("http_%d", c.Status)
	case len(c.Response) == 0:
		cs.reason = "no_response"
	case cutOff(c.EndReason):
		cs.reason = c.EndReason
	case !finished(c.API, c.Response):
		cs.reason = "no_finish_reason"
	default:
		comp, err := DecodeCompletion(c.API, c.Response)
		if err != nil {
			cs.reason = "bad_response"
			return cs
		}
		cs.comp = comp
		for i := range comp {
			if k, ok := contentKey(&comp[i]); ok {
				cs.keys = append(cs.keys, k)
			}
		}
	}
	return cs
}

// cutOff reports whether a call's generation was cut before it ended:
// the client went away, the upstream failed, or it fell silent. Its
// completion is a prefix of what the policy would have generated, so no
// sample may train on it.
func cutOff(endReason string) bool {
	switch endReason {
	case recorder.EndClientGone, recorder.EndUpstreamError, recorder.EndIdleTimeout:
		return true
	}
	return false
}

// finished reports whether a response says its generation ended: a
// finish_reason (chat, completions), stop_reason (Anthropic) or a final
// status (Responses) that is not null. A response that omits the member
// is taken as finished.
func finished(api string, response []byte) bool {
	path := map[string]string{apiChat: "choices.0.finish_reason", apiCompletions: "choices.0.finish_reason",
		apiMessages: "stop_reason", apiResponses: "status"}[api]
	v := gjson.GetBytes(response, path)
	if api == apiResponses && v.Exists() {
		return v.Str == "completed" || v.Str == "incomplete"
	}
	return !v.Exists() || v.Type != gjson.Null
}

// thread assigns every usable call of calls (in arrival order) to a
// segment. Recorded lineage wins; calls without it are placed by prefix
// hash chains. ops is the work it did (see threader.ops).
func thread(calls []*callState) (segs []*segment, ops int) {
	t := &threader{calls: calls, tips: map[uint64][]int{}, byID: map[string]int{}}
	for i, cs := range calls {
		t.ops++
		t.byID[cs.call.CallID] = i
		if cs.els.chain == nil {
			continue
		}
		if cs.usable() {
			switch l := cs.call.Lineage; {
			case l != nil && l.Kind != "":
				t.placeByLineage(i, l)
			case cs.call.API == apiCompletions:
				t.inferText(i)
			default:
				t.infer(i)
			}
		}
		full := cs.els.chain[len(cs.els.raw)]
		t.tips[full] = append(t.tips[full], i)
	}
	t.resolveSplits()
	return t.segs, t.ops
}

// infer places call i by its prompt: the longest earlier prompt it
// extends with that call's completion, else an identical prompt (retry),
// else the segment it shares most history with.
func (t *threader) infer(i int) {
	cs := t.calls[i]
	n := len(cs.els.raw)
	t.ops++
	for _, prev := range slices.Backward(t.tips[cs.els.chain[n]]) {
		t.ops++
		if t.calls[prev].usable() {
			t.retry(i, prev)
			return
		}
		t.calls[prev].retriedBy = i
	}
	for k := n - 1; k >= 1; k-- {
		t.ops++
		for _, prev := range slices.Backward(t.tips[cs.els.chain[k]]) {
			t.ops++
			pc := t.calls[prev]
			if !pc.usable() || pc.call.API != cs.call.API {
				continue
			}
			end, ok := matchSlot(cs.call.API, &cs.els, k, pc.keys)
			t.ops += end - k
			if ok {
				pc.slotStart, pc.slotEnd = k, end
				t.extend(i, prev, recorder.LineageExtend)
				return
			}
		}
	}
	t.diverge(i)
}

// matchSlot reports whether prompt elements from start hold, in order,
// messages with the content keys want (an earlier call's completion),
// skipping assistant elements that are empty or reasoning only. end is one
// past the slot, or, when !ok, one past the last element read.
func matchSlot(api string, e *elements, start int, want []uint64) (end int, ok bool) {
	j := start
	for _, k := range want {
		for {
			if j >= len(e.raw) {
				return j, false
			}
			m, err := decodeElement(api, e, j)
			j++
			if err != nil {
				return j, false
			}
			got, nonEmpty := contentKey(&m)
			if !nonEmpty && m.Role == "assistant" {
				continue
			}
			if got != k {
				return j, false
			}
			break
		}
	}
	return j, true
}

// extend appends call i after prev: to prev's segment when prev is its
// last call, else to a new fork of it.
func (t *threader) extend(i, prev int, kind string) {
	cs, pc := t.calls[i], t.calls[prev]
	cs.kind, cs.parent = kind, prev
	if pc.seg != nil && pc.seg.calls[len(pc.seg.calls)-1] == prev {
		t.add(pc.seg, i)
		return
	}
	segKind := SegmentFork
	if pc.seg != nil && t.edits(cs, t.calls[pc.seg.calls[len(pc.seg.calls)-1]]) {
		segKind, cs.kind = SegmentEdited, recorder.LineageEdited
	}
	t.add(t.newSegment(segKind, pc.seg, false), i)
}

// edits reports whether next, which branches off before last (the last
// call of a segment), rewrote a message of last's history rather than
// starting a new branch: the first element where they differ has the same
// role in both.
func (t *threader) edits(next, last *callState) bool {
	l := t.commonPrefix(next.els.chain, last.els.chain)
	if l >= len(next.els.raw) || l >= len(last.els.raw) {
		return false
	}
	role := func(raw []byte) string { return gjson.Get(unsafeString(raw), "role").String() }
	return role(next.els.raw[l]) == role(last.els.raw[l])
}

// retry makes call i replace prev, an earlier call with the same prompt.
func (t *threader) retry(i, prev int) {
	cs, pc := t.calls[i], t.calls[prev]
	cs.kind, cs.parent = recorder.LineageRetry, prev
	s := pc.seg
	if s == nil || s.calls[len(s.calls)-1] != prev {
		t.add(t.newSegment(SegmentRetry, s, false), i)
		return
	}
	pc.retriedBy = i
	s.calls[len(s.calls)-1] = i
	s.retried = append(s.retried, prev)
	cs.seg = s
	s.lastOrder = i
}

// diverge starts a new segment for call i, which continues no earlier
// call: edited when it shares history beyond the system prompt with a
// segment, else compacted or fork (decided later), else a new root.
func (t *threader) diverge(i int) {
	cs := t.calls[i]
	var best *segment
	bestLen := -1
	for _, s := range slices.Backward(t.segs) {
		t.ops++
		last := t.calls[s.calls[len(s.calls)-1]]
		if last.call.API != cs.call.API {
			continue
		}
		if l := t.commonPrefix(cs.els.chain, last.els.chain); l > bestLen {
			best, bestLen = s, l
		}
	}
	switch {
	case best == nil && len(t.segs) == 0:
		cs.kind = recorder.LineageRoot
		t.add(t.newSegment(SegmentRoot, nil, false), i)
	case best != nil && bestLen > cs.els.sysLen:
		cs.kind, cs.parent = recorder.LineageEdited, best.calls[len(best.calls)-1]
		t.add(t.newSegment(SegmentEdited, best, false), i)
	case best != nil && bestLen > 0:
		cs.kind, cs.parent = recorder.LineageCompacted, best.calls[len(best.calls)-1]
		t.add(t.newSegment(SegmentCompacted, best, true), i)
	default:
		parent := t.mostRecent()
		cs.kind = recorder.LineageFork
		if parent != nil {
			cs.parent = parent.calls[len(parent.calls)-1]
		}
		t.add(t.newSegment(SegmentFork, parent, false), i)
	}
}

// placeByLineage follows the lineage the proxy recorded for call i.
func (t *threader) placeByLineage(i int, l *recorder.Lineage) {
	cs := t.calls[i]
	prev, ok := t.byID[l.ParentCallID]
	if !ok || l.Kind == recorder.LineageRoot || !t.calls[prev].usable() || t.calls[prev].seg == nil {
		cs.kind = l.Kind
		parent := t.mostRecent()
		kind := SegmentRoot
		if parent != nil {
			kind = SegmentFork
		}
		t.add(t.newSegment(kind, parent, false), i)
		return
	}
	pc := t.calls[prev]
	switch l.Kind {
	case recorder.LineageExtend, recorder.LineageRetokenized, recorder.LineageTemplateRewrite:
		if k := len(pc.els.raw); k <= len(cs.els.raw) && cs.els.chain[k] == pc.els.chain[k] {
			end, ok := matchSlot(cs.call.API, &cs.els, k, pc.keys)
			t.ops += 1 + end - k
			if ok {
				pc.slotStart, pc.slotEnd = k, end
			}
		}
		if pc.slotEnd < 0 {
			pc.slotStart = len(pc.els.raw)
		}
		t.extend(i, prev, l.Kind)
	case recorder.LineageRetry:
		t.retry(i, prev)
	default:
		kind := map[string]string{recorder.LineageEdited: SegmentEdited,
			recorder.LineageCompacted: SegmentCompacted}[l.Kind]
		if kind == "" {
			kind = SegmentFork
		}
		cs.kind, cs.parent = l.Kind, prev
		t.add(t.newSegment(kind, pc.seg, false), i)
	}
}

func (t *threader) newSegment(kind string, parent *segment, provisional bool) *segment {
	s := &segment{kind: kind, parent: parent, provisional: provisional, firstOrder: -1}
	t.segs = append(t.segs, s)
	return s
}

func (t *threader) add(s *segment, i int) {
	s.calls = append(s.calls, i)
	if s.firstOrder < 0 {
		s.firstOrder = i
	}
	s.lastOrder = i
	t.calls[i].seg = s
}

// commonPrefix is [commonPrefix], counting its probes.
func (t *threader) commonPrefix(a, b []uint64) int {
	t.ops += bits.Len(uint(min(len(a), len(b))))
	return commonPrefix(a, b)
}

// mostRecent returns the segment that received the latest call.
func (t *threader) mostRecent() *segment {
	var best *segment
	for _, s := range t.segs {
		t.ops++
		if best == nil || s.lastOrder > best.lastOrder {
			best = s
		}
	}
	return best
}

// resolveSplits decides provisional segments: a segment that shares only
// the system prompt with its parent is a fork when the parent received
// calls after it started (a subagent), and a compaction otherwise.
func (t *threader) resolveSplits() {
	for _, s := range t.segs {
		if !s.provisional {
			continue
		}
		s.provisional = false
		if s.parent != nil && s.parent.lastOrder > s.firstOrder {
			s.kind = SegmentFork
			t.calls[s.calls[0]].kind = recorder.LineageFork
		}
	}
}

// inferText places a completions call: it extends the segment whose last
// prompt and completion its prompt starts with (token ids when both calls
// have them, else text), retries an identical prompt, or starts a fork.
func (t *threader) inferText(i int) {
	cs := t.calls[i]
	t.ops++
	for _, prev := range slices.Backward(t.tips[cs.els.chain[len(cs.els.raw)]]) {
		t.ops++
		if t.calls[prev].usable() {
			t.retry(i, prev)
			return
		}
		t.calls[prev].retriedBy = i
	}
	for _, s := range slices.Backward(t.segs) {
		t.ops++
		last := s.calls[len(s.calls)-1]
		if lc := t.calls[last]; lc.call.API == apiCompletions && textExtends(lc, cs) {
			t.extend(i, last, recorder.LineageExtend)
			return
		}
	}
	parent := t.mostRecent()
	cs.kind = recorder.LineageRoot
	kind := SegmentRoot
	if parent != nil {
		cs.kind, kind = recorder.LineageFork, SegmentFork
	}
	t.add(t.newSegment(kind, parent, false), i)
}

// textExtends reports whether next's prompt starts with prev's prompt and
// completion. Its cost is linear in next's prompt.
func textExtends(prev, next *callState) bool {
	if pt, nt := prev.call.Tokens, next.call.Tokens; pt != nil && nt != nil && len(nt.PromptIDs) > 0 {
		return hasIDPrefix(nt.PromptIDs, pt.PromptIDs, pt.CompletionIDs)
	}
	p, okp := completionsPrompt(prev)
	n, okn := completionsPrompt(next)
	return okp && okn && strings.HasPrefix(n, p) && strings.HasPrefix(n[len(p):], completionText(prev))
}

// hasIDPrefix reports whether ids starts with a followed by b.
func hasIDPrefix(ids, a, b []int32) bool {
	return len(ids) >= len(a)+len(b) && slices.Equal(ids[:len(a)], a) && slices.Equal(ids[len(a):len(a)+len(b)], b)
}

// completionsPrompt returns a completions call's prompt text.
func completionsPrompt(cs *callState) (string, bool) {
	if len(cs.els.raw) != 1 {
		return "", false
	}
	return jsonString(cs.els.raw[0])
}

// completionText returns the text of a call's completion.
func completionText(cs *callState) string {
	if len(cs.comp) == 0 || len(cs.comp[0].Parts) == 0 {
		return ""
	}
	return cs.comp[0].Parts[0].Text
}

// isJSONObject reports whether raw is a valid JSON object.
func isJSONObject(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}
