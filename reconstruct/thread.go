package reconstruct

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/lineage"
)

// Segment kinds: how a segment starts relative to its parent. The lineage
// of its first call decides it (docs/token-fidelity.md defines the kinds).
const (
	SegmentRoot      = "root"      // the first thread of an episode
	SegmentFork      = "fork"      // a new thread (subagent, side call, branch) while the parent goes on
	SegmentCompacted = "compacted" // history replaced by a summary
	SegmentEdited    = "edited"    // history changed by the harness
	SegmentRetry     = "retry"     // a retry of a call that was not its segment's last
	SegmentDrift     = "drift"     // split off at a token drift (--on-drift split)
)

// callState is one call of an episode as reconstruction sees it.
type callState struct {
	call   *recorder.Call
	els    elements
	comp   []Message            // generated messages; nil when unusable
	out    []uint64             // message units of the completion (lineage.Output)
	reason string               // why the call is unusable; "" when usable
	lin    recorder.Lineage     // as the lineage package classifies the call
	kind   recorder.LineageKind // lineage kind the call is placed by
	parent int                  // call this one continues or retries, or -1
	seg    *segment
	turn   int // index in seg.calls, or -1 (set by newEpisode)
	// retriedBy is the later attempt that replaced this call, or -1.
	retriedBy int
}

// usable reports whether the call produced a completion to train on.
func (c *callState) usable() bool { return c.reason == "" }

// segment is a run of calls whose prompts extend each other.
type segment struct {
	id         int // final index, set by numberSegments
	parent     *segment
	kind       string
	calls      []int // indices of final attempts, in order
	retried    []int // superseded attempts
	drift      *Drift
	dropped    bool // --on-drift drop removed it
	lastOrder  int  // order of the last call added
	firstOrder int
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
	byID  map[string]int // call id -> first call with it
	// ops counts the work placing calls took (calls, steps back through
	// unusable parents, segments scanned), so that tests can check it
	// grows linearly with the episode (see linear_test.go); the lineage
	// package tests its own.
	ops int
}

// newCallState reads one call; an unusable call keeps its reason.
func newCallState(c *recorder.Call) *callState {
	cs := &callState{call: c, parent: -1, retriedBy: -1, turn: -1}
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
		cs.reason = string(c.EndReason)
	case !finished(c.API, c.Response):
		cs.reason = "no_finish_reason"
	default:
		comp, err := DecodeCompletion(c.API, c.Response)
		if err != nil {
			cs.reason = "bad_response"
			return cs
		}
		cs.comp = comp
		cs.out = lineage.Output(c.API, c.Response)
	}
	return cs
}

// cutOff reports whether a call's generation was cut before it ended:
// the client went away, the upstream failed, or it fell silent. Its
// completion is a prefix of what the policy would have generated, so no
// sample may train on it.
func cutOff(endReason recorder.EndReason) bool {
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
func finished(api recorder.API, response []byte) bool {
	path := map[recorder.API]string{apiChat: "choices.0.finish_reason", apiCompletions: "choices.0.finish_reason",
		apiMessages: "stop_reason", apiResponses: "status"}[api]
	v := gjson.GetBytes(response, path)
	if api == apiResponses && v.Exists() {
		return v.Str == "completed" || v.Str == "incomplete"
	}
	return !v.Exists() || v.Type != gjson.Null
}

// thread assigns every usable call of calls (in arrival order) to a
// segment by the lineage the lineage package classifies for the episode:
// the same classification the proxy records at call time, computed here
// over the whole stored episode so that it does not depend on which
// replica saw which call. ops is the work it did (see threader.ops).
func thread(calls []*callState) (segs []*segment, ops int) {
	recs := make([]*recorder.Call, len(calls))
	for i, cs := range calls {
		recs[i] = cs.call
	}
	t := &threader{calls: calls, byID: map[string]int{}}
	for i, l := range lineage.Classify(recs) {
		t.ops++
		cs := calls[i]
		cs.lin = l
		if _, seen := t.byID[cs.call.CallID]; !seen {
			t.byID[cs.call.CallID] = i
		}
		if cs.usable() {
			t.placeByLineage(i, t.lineageOf(i))
		}
	}
	return t.segs, t.ops
}

// lineageOf returns the lineage call i is placed by: its own, or, while
// its parent produced nothing to train on and i retries or continues it,
// that parent's. A retry replaces the attempt it repeats.
func (t *threader) lineageOf(i int) recorder.Lineage {
	l := t.calls[i].lin
	for {
		t.ops++
		prev, ok := t.byID[l.ParentCallID]
		if !ok || prev >= i || t.calls[prev].usable() || !continues(l.Kind) {
			return l
		}
		if l.Kind == recorder.LineageRetry {
			t.calls[prev].retriedBy = i
		}
		i, l = prev, t.calls[prev].lin
	}
}

// continues reports whether a call of lineage kind continues or repeats
// its parent's conversation.
func continues(kind recorder.LineageKind) bool {
	switch kind {
	case recorder.LineageRetry, recorder.LineageExtend, recorder.LineageRetokenized, recorder.LineageTemplateRewrite:
		return true
	}
	return false
}

// extend appends call i after prev: to prev's segment when prev is its
// last call, else to a new fork of it.
func (t *threader) extend(i, prev int, kind recorder.LineageKind) {
	cs, pc := t.calls[i], t.calls[prev]
	cs.kind, cs.parent = kind, prev
	if pc.seg != nil && pc.seg.calls[len(pc.seg.calls)-1] == prev {
		t.add(pc.seg, i)
		return
	}
	t.add(t.newSegment(SegmentFork, pc.seg), i)
}

// retry makes call i replace prev, an earlier call with the same prompt.
func (t *threader) retry(i, prev int) {
	cs, pc := t.calls[i], t.calls[prev]
	cs.kind, cs.parent = recorder.LineageRetry, prev
	s := pc.seg
	if s == nil || s.calls[len(s.calls)-1] != prev {
		t.add(t.newSegment(SegmentRetry, s), i)
		return
	}
	pc.retriedBy = i
	s.calls[len(s.calls)-1] = i
	s.retried = append(s.retried, prev)
	cs.seg = s
	s.lastOrder = i
}

// placeByLineage places call i by lineage l: a call whose parent is in no
// segment starts one (the root, or a fork of the latest segment).
func (t *threader) placeByLineage(i int, l recorder.Lineage) {
	cs := t.calls[i]
	prev, ok := t.byID[l.ParentCallID]
	if !ok || prev >= i || l.Kind == recorder.LineageRoot || !t.calls[prev].usable() || t.calls[prev].seg == nil {
		t.startSegment(i, l.Kind)
		return
	}
	switch l.Kind {
	case recorder.LineageExtend, recorder.LineageRetokenized, recorder.LineageTemplateRewrite:
		t.extend(i, prev, l.Kind)
	case recorder.LineageRetry:
		t.retry(i, prev)
	default:
		kind := map[recorder.LineageKind]string{recorder.LineageEdited: SegmentEdited,
			recorder.LineageCompacted: SegmentCompacted}[l.Kind]
		if kind == "" {
			kind = SegmentFork
		}
		cs.kind, cs.parent = l.Kind, prev
		t.add(t.newSegment(kind, t.calls[prev].seg), i)
	}
}

// startSegment starts a segment with call i, whose parent is in none: the
// root when it is the first, else a fork of the latest segment.
func (t *threader) startSegment(i int, kind recorder.LineageKind) {
	parent := t.mostRecent()
	seg := SegmentFork
	if parent == nil {
		seg, kind = SegmentRoot, recorder.LineageRoot
	}
	t.calls[i].kind = kind
	t.add(t.newSegment(seg, parent), i)
}

func (t *threader) newSegment(kind string, parent *segment) *segment {
	s := &segment{kind: kind, parent: parent, firstOrder: -1}
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
