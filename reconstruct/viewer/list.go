package viewer

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/orchard-rl/orchard/recorder"
)

// storeChunk is how many summaries one store page asks for while the list
// scans; it bounds what a request holds at once.
const storeChunk = 100

// listQuery is the list page's parameters.
type listQuery struct {
	Filter               recorder.Filter // task, group, status, since: applied by the store
	Until                time.Time
	RewardMin, RewardMax *float64
	Harness, Drift, Rule string
	Search               string
	Sort                 string
	Limit                int
	Cursor               listCursor
}

// deep reports whether the query has filters that need an episode's calls.
func (q *listQuery) deep() bool {
	return q.Harness != "" || q.Drift != "" || q.Rule != "" || q.Search != ""
}

// listCursor resumes a scan: the store cursor of the store page the scan
// stopped in, and how many of that page's episodes it had looked at.
type listCursor struct {
	Store string `json:"c,omitempty"`
	Skip  int    `json:"s,omitempty"`
}

func (c listCursor) encode() string {
	b, _ := json.Marshal(c) // two plain fields always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeListCursor(s string) (listCursor, bool) {
	var c listCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	return c, err == nil && json.Unmarshal(b, &c) == nil && c.Skip >= 0 && c.Skip <= storeChunk
}

var sortKeys = []string{"created", "-created", "reward", "-reward", "calls", "-calls"}

func (h *Handler) parseList(v url.Values) (*listQuery, error) {
	q := newQuery(v, "task", "group", "status", "harness", "reward_min", "reward_max", "drift", "rule", "q", "since", "until", "sort", "limit", "cursor", "episode", "segment", "turn", "token")
	lq := &listQuery{
		Filter:  recorder.Filter{TaskID: q.str("task"), GroupID: q.str("group"), Since: q.time("since")},
		Until:   q.time("until"),
		Harness: q.str("harness"), Rule: q.str("rule"), Search: q.str("q"),
		RewardMin: q.float("reward_min"), RewardMax: q.float("reward_max"),
		Sort:  q.oneOf("sort", "created", sortKeys...),
		Limit: q.int("limit", h.opts.PageSize, 1, maxPageSize),
	}
	lq.Filter.Status = q.oneOf("status", "", recorder.StatusRunning, recorder.StatusSuccess, recorder.StatusFailure, recorder.StatusError, recorder.StatusTimeout)
	lq.Drift = q.oneOf("drift", "", driftClasses...)
	if c := q.str("cursor"); c != "" {
		var ok bool
		if lq.Cursor, ok = decodeListCursor(c); !ok {
			q.fail("cursor", "%q is not a cursor of this list (follow the page's next link)", c)
		}
	}
	if lq.RewardMin != nil && lq.RewardMax != nil && *lq.RewardMin > *lq.RewardMax {
		q.fail("reward_min", "%g is above reward_max %g", *lq.RewardMin, *lq.RewardMax)
	}
	return lq, q.err
}

// listRow is one episode of the list.
type listRow struct {
	recorder.EpisodeSummary
	Harness string `json:"harness,omitempty"`
}

// listView is what the list page shows.
type listView struct {
	Query    *listQuery        `json:"-"`
	Rows     []listRow         `json:"episodes"`
	Counts   []statusCount     `json:"counts"`
	CountOf  string            `json:"counts_of"` // "store" or "page"
	Scanned  int               `json:"scanned"`   // summaries read
	Deep     int               `json:"reconstructed"`
	Next     string            `json:"next_cursor,omitempty"`
	Partial  bool              `json:"partial"` // the scan budget ran out before the page filled
	Params   url.Values        `json:"-"`
	Links    map[string]string `json:"-"`
	Statuses []string          `json:"-"`
}

type statusCount struct {
	Status string `json:"status"`
	N      int    `json:"n"`
}

func (h *Handler) listPage(r *http.Request) (*page, error) {
	if id := r.URL.Query().Get("episode"); id != "" {
		return nil, redirectTo(deepLink(id, r.URL.Query()))
	}
	lq, err := h.parseList(r.URL.Query())
	if err != nil {
		return nil, err
	}
	lv, err := h.scan(r.Context(), lq)
	if err != nil {
		return nil, err
	}
	if err := h.counts(r.Context(), lq, lv); err != nil {
		return nil, err
	}
	sortRows(lv.Rows, lq.Sort)
	lv.Query, lv.Params, lv.Statuses = lq, r.URL.Query(), statuses
	lv.Links = map[string]string{}
	if lv.Next != "" {
		lv.Links["next"] = withParam(r.URL.Query(), "cursor", lv.Next)
	}
	return &page{Name: "list", Title: "Episodes", Data: lv, JSON: lv}, nil
}

var statuses = []string{recorder.StatusRunning, recorder.StatusSuccess, recorder.StatusFailure, recorder.StatusError, recorder.StatusTimeout}

// scan reads the store from the query's cursor until the page is full or
// a budget is spent, keeping the episodes that pass every filter.
func (h *Handler) scan(ctx context.Context, q *listQuery) (*listView, error) {
	lv := &listView{}
	f := q.Filter
	f.Cursor, f.Limit = q.Cursor.Store, storeChunk
	skip := q.Cursor.Skip
	for {
		sums, next, err := h.opts.Source.ListEpisodes(ctx, f)
		if err != nil {
			return nil, badStoreCursor(err, f.Cursor)
		}
		for i := skip; i < len(sums); i++ {
			if len(lv.Rows) == q.Limit || lv.Scanned == h.opts.ScanBudget || (q.deep() && lv.Deep == h.opts.DeepScanBudget) {
				lv.Next, lv.Partial = listCursor{Store: f.Cursor, Skip: i}.encode(), len(lv.Rows) < q.Limit
				return lv, nil
			}
			if !q.Until.IsZero() && sums[i].CreatedAt.After(q.Until) {
				return lv, nil // listings are in creation order: nothing later matches
			}
			lv.Scanned++
			row, ok, err := h.keep(ctx, q, &sums[i], lv)
			if err != nil {
				return nil, err
			}
			if ok {
				lv.Rows = append(lv.Rows, row)
			}
		}
		if next == "" {
			return lv, nil
		}
		f.Cursor, skip = next, 0
	}
}

// badStoreCursor reports a cursor the store refused as the caller's
// mistake; other failures pass through.
func badStoreCursor(err error, cursor string) error {
	if cursor != "" && statusFor(err) == http.StatusInternalServerError {
		return badRequest("parameter cursor: the store refused it: %v", err)
	}
	return err
}

// keep applies the filters the store does not.
func (h *Handler) keep(ctx context.Context, q *listQuery, s *recorder.EpisodeSummary, lv *listView) (listRow, bool, error) {
	row := listRow{EpisodeSummary: *s}
	if q.RewardMin != nil && (s.Reward == nil || *s.Reward < *q.RewardMin) ||
		q.RewardMax != nil && (s.Reward == nil || *s.Reward > *q.RewardMax) {
		return row, false, nil
	}
	if !q.deep() {
		return row, true, nil
	}
	lv.Deep++
	return h.deepMatch(ctx, q, row)
}

// counts fills the per-status counts: from the store's index when it has
// one, else of the rows shown.
func (h *Handler) counts(ctx context.Context, q *listQuery, lv *listView) error {
	n := map[string]int{}
	lv.CountOf = "page"
	if c, ok := h.opts.Source.(episodeCounter); ok && q.Until.IsZero() {
		var err error
		if n, err = c.CountEpisodes(ctx, q.Filter); err != nil {
			return err
		}
		lv.CountOf = "store"
	} else {
		for _, r := range lv.Rows {
			n[r.Status]++
		}
	}
	for _, s := range statuses {
		lv.Counts = append(lv.Counts, statusCount{s, n[s]})
	}
	return nil
}

func sortRows(rows []listRow, key string) {
	desc := key[0] == '-'
	by := func(a, b listRow) int {
		switch key {
		case "reward", "-reward":
			return cmpReward(a.Reward, b.Reward)
		case "calls", "-calls":
			return cmp.Compare(a.Calls, b.Calls)
		}
		return 0 // created: the store's order
	}
	slices.SortStableFunc(rows, by)
	if desc {
		slices.Reverse(rows)
	}
}

// cmpReward orders episodes without a reward first.
func cmpReward(a, b *float64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}

// withParam returns the list address with v's parameters and name=value.
func withParam(v url.Values, name, value string) string {
	c := url.Values{}
	for k, vs := range v {
		if k != "cursor" && k != "format" {
			c[k] = vs
		}
	}
	c.Set(name, value)
	return "/?" + c.Encode()
}

// deepLink is the episode page address of /?episode=&turn=&token=.
func deepLink(id string, v url.Values) string {
	c := url.Values{}
	for _, k := range []string{"segment", "turn", "token"} {
		if s := v.Get(k); s != "" {
			c.Set(k, s)
		}
	}
	u := "/episodes/" + url.PathEscape(id)
	if len(c) > 0 {
		u += "?" + c.Encode()
	}
	if t := v.Get("token"); t != "" {
		if _, err := strconv.Atoi(t); err == nil {
			u += "#t" + t
		}
	}
	return u
}

// redirect is an error-shaped instruction to send the browser elsewhere.
type redirect struct{ to string }

func (r *redirect) Error() string { return "see " + r.to }

func redirectTo(u string) error { return &redirect{u} }
