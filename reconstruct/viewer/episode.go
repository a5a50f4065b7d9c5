package viewer

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// episodeView is what an episode page shows.
type episodeView struct {
	Episode      recorder.EpisodeSummary  `json:"episode"`
	Header       header                   `json:"header"`
	Timeline     []bar                    `json:"timeline"`
	Segments     []segNode                `json:"segments"`
	Selection    selection                `json:"selection"`
	Turns        []reconstruct.Turn       `json:"turns"`
	Trajectories []reconstruct.Trajectory `json:"trajectories"`
	Messages     []messageView            `json:"-"`
	Pane         *tokenPane               `json:"-"`
	Note         string                   `json:"-"` // why there is no token pane
	Modes        []string                 `json:"-"`
}

type header struct {
	Calls            int           `json:"calls"`
	PromptTokens     int64         `json:"prompt_tokens"`
	CompletionTokens int64         `json:"completion_tokens"`
	Duration         time.Duration `json:"duration_ns"`
	Harness          string        `json:"harness,omitempty"`
	Model            string        `json:"model,omitempty"`
}

// bar is one call of the turn timeline.
type bar struct {
	Seq      int64         `json:"seq"`
	CallID   string        `json:"call_id"`
	Latency  time.Duration `json:"latency_ns"`
	Outcome  string        `json:"outcome"` // ok|tool_error|drift|retry|unusable
	Width    int           `json:"-"`       // 1..20, a twentieth of the slowest call each
	Selected bool          `json:"-"`
	Link     string        `json:"-"`
}

// segNode is one segment in the segment tree, depth-first.
type segNode struct {
	ID        int                `json:"segment"`
	Kind      string             `json:"kind"`
	Parent    *int               `json:"parent_segment"`
	Depth     int                `json:"depth"`
	Drift     *reconstruct.Drift `json:"drift,omitempty"`
	Calls     int                `json:"calls"`
	Tokens    int                `json:"tokens"`
	Trainable int                `json:"trainable_tokens"`
	Selected  bool               `json:"-"`
	Link      string             `json:"-"`
}

// selection is what the page focuses: a segment (-1: none), a turn by
// call seq (0: none), a token of the segment (-1: none).
type selection struct {
	Segment int    `json:"segment"`
	Turn    int64  `json:"turn"`
	Token   int    `json:"token"`
	Mode    string `json:"pane"`
}

var paneModes = []string{"mask", "logprob", "advantage"}

func (h *Handler) episodePage(r *http.Request) (*page, error) {
	id := chi.URLParam(r, "id")
	q := newQuery(r.URL.Query(), "segment", "turn", "token", "pane")
	sel := selection{Segment: q.int("segment", -1, 0, 1<<20), Turn: int64(q.int("turn", 0, 1, 1<<30)),
		Token: q.int("token", -1, 0, 1<<30), Mode: q.oneOf("pane", "mask", paneModes...)}
	if q.err != nil {
		return nil, q.err
	}
	ev, err := h.loadEpisode(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if err := ev.selectView(sel); err != nil {
		return nil, err
	}
	ev.Modes = paneModes
	return &page{Name: "episode", Title: "Episode " + id, Data: ev, JSON: ev}, nil
}

// loadEpisode reads an episode's summary and calls and reconstructs its
// turns and trajectories.
func (h *Handler) loadEpisode(ctx context.Context, id string) (*episodeView, error) {
	sum, err := h.opts.Source.Episode(ctx, id)
	if err != nil {
		return nil, notFoundOr(err, "no episode %q in this store", id)
	}
	calls, err := h.opts.Source.Calls(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("calls of %s: %w", id, err)
	}
	ev := &episodeView{Episode: *sum, Header: headerOf(calls)}
	if ev.Turns, err = h.turns(ctx, id); err != nil {
		return nil, err
	}
	if ev.Trajectories, err = h.trajectories(ctx, id); err != nil {
		return nil, err
	}
	ev.Timeline = timeline(id, calls, ev.Turns, ev.Trajectories)
	ev.Segments = segmentTree(id, ev.Trajectories)
	return ev, nil
}

func notFoundOr(err error, format string, args ...any) error {
	if statusFor(err) == http.StatusNotFound {
		return notFound(format, args...)
	}
	return err
}

func headerOf(calls []*recorder.Call) header {
	h := header{Calls: len(calls)}
	var first, last time.Time
	for _, c := range calls {
		h.PromptTokens += gjson.GetBytes(c.Usage, "prompt_tokens").Int() + gjson.GetBytes(c.Usage, "input_tokens").Int()
		h.CompletionTokens += gjson.GetBytes(c.Usage, "completion_tokens").Int() + gjson.GetBytes(c.Usage, "output_tokens").Int()
		if first.IsZero() || c.StartedAt.Before(first) {
			first = c.StartedAt
		}
		if c.EndedAt.After(last) {
			last = c.EndedAt
		}
		h.Harness, h.Model = cmpOr(h.Harness, c.Harness), cmpOr(h.Model, c.Model)
	}
	if !first.IsZero() {
		h.Duration = last.Sub(first)
	}
	return h
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func episodeLink(id string, v url.Values) string {
	u := "/episodes/" + url.PathEscape(id)
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	return u
}

// timeline lays out the calls as bars sized by latency and classed by
// outcome.
func timeline(id string, calls []*recorder.Call, turns []reconstruct.Turn, trajs []reconstruct.Trajectory) []bar {
	latency := map[string]time.Duration{}
	var slowest time.Duration
	for _, c := range calls {
		latency[c.CallID] = c.EndedAt.Sub(c.StartedAt)
		slowest = max(slowest, latency[c.CallID])
	}
	drifted := map[string]bool{}
	for _, t := range trajs {
		if t.Lineage.Drift != nil {
			drifted[t.Lineage.Drift.CallID] = true
		}
	}
	out := make([]bar, len(turns))
	for i, t := range turns {
		b := bar{Seq: t.Seq, CallID: t.CallID, Latency: latency[t.CallID], Outcome: turnOutcome(&t, drifted), Width: 1}
		if slowest > 0 {
			b.Width = max(1, int((20*b.Latency+slowest-1)/slowest))
		}
		b.Link = episodeLink(id, url.Values{"turn": {fmt.Sprint(t.Seq)}})
		out[i] = b
	}
	return out
}

func turnOutcome(t *reconstruct.Turn, drifted map[string]bool) string {
	switch {
	case t.Outcome.Unusable != "":
		return "unusable"
	case drifted[t.CallID]:
		return "drift"
	case t.Lineage.Kind == recorder.LineageRetry || t.Lineage.RetriedBy != "":
		return "retry"
	case promptToolError(t.Prompt):
		return "tool_error"
	}
	return "ok"
}

// segmentTree orders segments depth-first under their parents.
func segmentTree(id string, trajs []reconstruct.Trajectory) []segNode {
	children := map[int][]int{}
	var roots []int
	for i, t := range trajs {
		if p := t.Lineage.ParentSegment; p != nil {
			children[*p] = append(children[*p], i)
		} else {
			roots = append(roots, i)
		}
	}
	var out []segNode
	var walk func(i, depth int)
	walk = func(i, depth int) {
		t := &trajs[i]
		n := segNode{ID: t.Segment, Kind: t.Lineage.Kind, Parent: t.Lineage.ParentSegment, Depth: depth, Drift: t.Lineage.Drift,
			Calls: len(t.Lineage.Calls), Link: episodeLink(id, url.Values{"segment": {fmt.Sprint(t.Segment)}})}
		if t.Tokens != nil {
			n.Tokens, n.Trainable = len(t.Tokens.InputIDs), countMask(t.Tokens.LossMask)
		}
		out = append(out, n)
		for _, c := range children[t.Segment] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return out
}

func countMask(m []int8) int {
	n := 0
	for _, v := range m {
		n += int(v)
	}
	return n
}

// selectView resolves the selection and builds the messages and token
// pane it shows.
func (ev *episodeView) selectView(sel selection) error {
	var turn *reconstruct.Turn
	if sel.Turn > 0 {
		i := slices.IndexFunc(ev.Turns, func(t reconstruct.Turn) bool { return t.Seq == sel.Turn })
		if i < 0 {
			return badRequest("parameter turn: episode has no call %d (it has %d)", sel.Turn, len(ev.Turns))
		}
		turn = &ev.Turns[i]
		if turn.Segment != nil && sel.Segment < 0 {
			sel.Segment = *turn.Segment
		}
	}
	if sel.Segment < 0 && turn == nil && len(ev.Trajectories) > 0 {
		sel.Segment = ev.Trajectories[0].Segment
	}
	ev.Selection = sel
	for i := range ev.Timeline {
		ev.Timeline[i].Selected = ev.Timeline[i].Seq == sel.Turn
	}
	for i := range ev.Segments {
		ev.Segments[i].Selected = ev.Segments[i].ID == sel.Segment
	}
	if sel.Segment < 0 {
		ev.Messages = turnMessages(turn)
		ev.Note = fmt.Sprintf("call %d is in no trajectory (%s)", turn.Seq, whyNoSegment(turn))
		return nil
	}
	ti := slices.IndexFunc(ev.Trajectories, func(t reconstruct.Trajectory) bool { return t.Segment == sel.Segment })
	if ti < 0 {
		return badRequest("parameter segment: episode has no segment %d (it has %d)", sel.Segment, len(ev.Trajectories))
	}
	t := &ev.Trajectories[ti]
	if turn != nil && (turn.Segment == nil || *turn.Segment != sel.Segment) {
		turn = nil // the call is in another segment: show the segment alone
	}
	ev.Messages = trajectoryMessages(t, turn)
	if t.Tokens == nil {
		ev.Note = "this segment has no token ids (the upstream returned none)"
		return nil
	}
	ev.Pane = newTokenPane(t, turn, sel)
	return nil
}

func whyNoSegment(t *reconstruct.Turn) string {
	switch {
	case t.Lineage.RetriedBy != "":
		return "retried by " + t.Lineage.RetriedBy
	case t.Outcome.Unusable != "":
		return "unusable: " + t.Outcome.Unusable
	}
	return "not trained on"
}
