package viewer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/go-chi/chi/v5"
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// groupView is what a group page shows.
type groupView struct {
	Group    string       `json:"group"`
	Rollouts []rollout    `json:"rollouts"`
	More     bool         `json:"more"` // the group has more rollouts than shown
	Diff     *rolloutDiff `json:"diff,omitempty"`
	Rewards  bool         `json:"-"`
}

// rollout is one episode of a group.
type rollout struct {
	recorder.EpisodeSummary
	// Advantage is the mean advantage of the rollout's turns, when an
	// annotator filled them.
	Advantage *float64 `json:"advantage"`
	// SelectionWeight is the planner's weight for the rollout, from the
	// episode metadata's selection_weight.
	SelectionWeight *float64 `json:"selection_weight,omitempty"`
	DiffLink        string   `json:"-"`
}

// rolloutDiff is where two rollouts' first segments part.
type rolloutDiff struct {
	A, B         string `json:"-"`
	Message      int    `json:"first_divergent_message"` // -1: identical
	AMessage     *messageView
	BMessage     *messageView
	Token        int   `json:"first_divergent_token"` // -1: identical or no token ids
	AToken       int32 `json:"a_token"`
	BToken       int32 `json:"b_token"`
	ATokens      int   `json:"a_tokens"`
	BTokens      int   `json:"b_tokens"`
	HasTokens    bool  `json:"has_tokens"`
	SameMessages bool  `json:"-"`
}

func (h *Handler) groupPage(r *http.Request) (*page, error) {
	id := chi.URLParam(r, "id")
	q := newQuery(r.URL.Query(), "a", "b")
	a, b := q.str("a"), q.str("b")
	if (a == "") != (b == "") {
		q.fail("a", "a diff needs both a and b")
	}
	if q.err != nil {
		return nil, q.err
	}
	gv, err := h.loadGroup(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if a != "" {
		if gv.Diff, err = h.diff(r.Context(), a, b); err != nil {
			return nil, err
		}
	}
	return &page{Name: "group", Title: "Group " + id, Data: gv, JSON: gv}, nil
}

func (h *Handler) loadGroup(ctx context.Context, id string) (*groupView, error) {
	sums, next, err := h.opts.Source.ListEpisodes(ctx, recorder.Filter{GroupID: id, Limit: h.opts.GroupMax})
	if err != nil {
		return nil, fmt.Errorf("list group %s: %w", id, err)
	}
	if len(sums) == 0 {
		return nil, notFound("no episodes in group %q", id)
	}
	gv := &groupView{Group: id, More: next != "", Rewards: h.opts.Annotator != nil}
	for i, s := range sums {
		ro := rollout{EpisodeSummary: s, SelectionWeight: metaFloat(s.Metadata, "selection_weight")}
		if h.opts.Annotator != nil {
			if ro.Advantage, err = h.meanAdvantage(ctx, s.ID); err != nil {
				return nil, err
			}
		}
		if i > 0 {
			ro.DiffLink = "/groups/" + url.PathEscape(id) + "?" + url.Values{"a": {sums[0].ID}, "b": {s.ID}}.Encode()
		}
		gv.Rollouts = append(gv.Rollouts, ro)
	}
	return gv, nil
}

func metaFloat(meta json.RawMessage, key string) *float64 {
	v := gjson.GetBytes(meta, key)
	if v.Type != gjson.Number {
		return nil
	}
	f := v.Float()
	return &f
}

func (h *Handler) meanAdvantage(ctx context.Context, id string) (*float64, error) {
	trajs, err := h.trajectories(ctx, id)
	if err != nil {
		return nil, err
	}
	sum, n := 0.0, 0
	for _, t := range trajs {
		for _, tt := range t.Turns {
			if tt.Advantage != nil {
				sum, n = sum+*tt.Advantage, n+1
			}
		}
	}
	if n == 0 {
		return nil, nil
	}
	m := sum / float64(n)
	return &m, nil
}

// diff compares the first segments of two rollouts: the first message
// that differs and the first token id that differs.
func (h *Handler) diff(ctx context.Context, a, b string) (*rolloutDiff, error) {
	ta, err := h.firstSegment(ctx, a)
	if err != nil {
		return nil, err
	}
	tb, err := h.firstSegment(ctx, b)
	if err != nil {
		return nil, err
	}
	d := &rolloutDiff{A: a, B: b, Message: firstDiff(len(ta.Messages), len(tb.Messages), func(i int) bool {
		x, _ := json.Marshal(ta.Messages[i]) // decoded JSON always marshals
		y, _ := json.Marshal(tb.Messages[i])
		return string(x) == string(y)
	}), Token: -1}
	if d.Message >= 0 {
		if d.Message < len(ta.Messages) {
			mv := newMessageView(d.Message, &ta.Messages[d.Message], nil)
			d.AMessage = &mv
		}
		if d.Message < len(tb.Messages) {
			mv := newMessageView(d.Message, &tb.Messages[d.Message], nil)
			d.BMessage = &mv
		}
	}
	if ta.Tokens != nil && tb.Tokens != nil {
		ia, ib := ta.Tokens.InputIDs, tb.Tokens.InputIDs
		d.HasTokens, d.ATokens, d.BTokens = true, len(ia), len(ib)
		d.Token = firstDiff(len(ia), len(ib), func(i int) bool { return ia[i] == ib[i] })
		if d.Token >= 0 && d.Token < len(ia) {
			d.AToken = ia[d.Token]
		}
		if d.Token >= 0 && d.Token < len(ib) {
			d.BToken = ib[d.Token]
		}
	}
	return d, nil
}

// firstDiff is the first index where two sequences of lengths na and nb
// differ (same reports equality at i), or -1 when they are equal.
func firstDiff(na, nb int, same func(i int) bool) int {
	for i := range min(na, nb) {
		if !same(i) {
			return i
		}
	}
	if na == nb {
		return -1
	}
	return min(na, nb)
}

func (h *Handler) firstSegment(ctx context.Context, id string) (*reconstruct.Trajectory, error) {
	trajs, err := h.trajectories(ctx, id)
	if err != nil {
		return nil, notFoundOr(err, "no episode %q in this store", id)
	}
	i := slices.IndexFunc(trajs, func(t reconstruct.Trajectory) bool { return t.Segment == 0 })
	if i < 0 {
		return nil, badRequest("episode %s has no segment 0 to compare", id)
	}
	return &trajs[i], nil
}
