package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/orchard-rl/orchard/recorder"
)

// EpisodeStore is what the episode API needs from the recorder's store.
type EpisodeStore interface {
	PutEpisode(ctx context.Context, ep *recorder.Episode) error
	AppendEvent(ctx context.Context, ev *recorder.Event) (int64, error)
	ListEpisodes(ctx context.Context, f recorder.Filter) ([]recorder.EpisodeSummary, string, error)
	Episode(ctx context.Context, id string) (*recorder.EpisodeSummary, error)
	Calls(ctx context.Context, episodeID string) ([]*recorder.Call, error)
	Events(ctx context.Context, episodeID string) ([]*recorder.Event, error)
}

// episodeAPI serves /orchard/v1/episodes.
type episodeAPI struct {
	store      EpisodeStore
	signer     *Signer
	adminToken string
	publicURL  string // base URL sandboxes reach the proxy at; "" means the request's Host
	tokenTTL   time.Duration
	finished   *finishedCache
	createMu   sync.Mutex // serialises create's check and put on a store that is no recorder.Creator

	feed    FinishFeed // nil: finishes are learnt from the store only
	log     *slog.Logger
	stopSub context.CancelFunc // nil without feed
	subDone chan struct{}

	mu      sync.Mutex           // guards following
	running map[string]time.Time // episodes seen running, and when
}

// runningRecheck is how long a replica trusts that an episode it saw running
// still is; a token of an episode finished on another replica is refused
// here at most this much later.
const runningRecheck = time.Second

// revocationDeadline bounds the store lookup of a revocation check, so that
// a paused store adds at most this much to a call (it once added 35-40 s).
const revocationDeadline = 250 * time.Millisecond

// revoked reports whether episode's tokens are revoked: it has finished or
// no longer exists. When the store cannot answer within revocationDeadline
// the check fails closed, except for an episode this replica has seen
// running (its token was good then, and finishes seen here are cached).
func (a *episodeAPI) revoked(ctx context.Context, episode string) bool {
	if a.finished.has(episode) {
		return true
	}
	a.mu.Lock()
	seen, ok := a.running[episode]
	a.mu.Unlock()
	if ok && time.Since(seen) < runningRecheck {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, revocationDeadline)
	defer cancel()
	sum, err := a.store.Episode(lctx, episode)
	switch {
	case errors.Is(err, recorder.ErrNotFound):
		return true
	case err != nil:
		return !ok
	case sum.Status != recorder.StatusRunning && sum.Status != "":
		a.finished.add(episode)
		a.mu.Lock()
		delete(a.running, episode)
		a.mu.Unlock()
		return true
	}
	a.mu.Lock()
	if len(a.running) > 1<<16 {
		clear(a.running)
	}
	a.running[episode] = time.Now()
	a.mu.Unlock()
	return false
}

func (a *episodeAPI) routes(r chi.Router) {
	r.Route("/orchard/v1", func(r chi.Router) {
		r.Use(a.requireAdmin)
		r.Post("/episodes", a.create)
		r.Get("/episodes", a.list)
		r.Get("/episodes/{id}", a.get)
		r.Post("/episodes/{id}/finish", a.finish)
		r.Post("/episodes/{id}/events", a.appendEvent)
		r.Get("/episodes/{id}/events", a.events)
	})
}

func (a *episodeAPI) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.adminToken != "" {
			_, tok := credential(r.Header)
			if subtle.ConstantTimeCompare([]byte(tok), []byte(a.adminToken)) != 1 {
				writeError(w, "", unauthorized("the episode API needs the admin token: send Authorization: Bearer <admin token>"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

type createReq struct {
	ID       string          `json:"id"`
	TaskID   string          `json:"task_id"`
	GroupID  string          `json:"group_id"`
	Metadata json.RawMessage `json:"metadata"`
}

// CreatedEpisode is the reply to POST /orchard/v1/episodes.
type CreatedEpisode struct {
	ID    string            `json:"id"`
	Token string            `json:"token"`
	Env   map[string]string `json:"env"`
}

func (a *episodeAPI) create(w http.ResponseWriter, r *http.Request) {
	var req createReq
	if e := decodeJSON(r, &req); e != nil {
		writeError(w, "", e)
		return
	}
	if req.ID == "" {
		req.ID = newEpisodeID()
	} else if e := checkEpisodeID(req.ID); e != nil {
		writeError(w, "", e)
		return
	}
	ep := &recorder.Episode{ID: req.ID, TaskID: req.TaskID, GroupID: req.GroupID, Metadata: req.Metadata,
		CreatedAt: time.Now().UTC(), Status: recorder.StatusRunning}
	err := a.createEpisode(r.Context(), ep)
	if errors.Is(err, recorder.ErrExists) {
		writeError(w, "", &Error{Status: http.StatusConflict, Type: "conflict", Message: "episode " + req.ID + " already exists"})
		return
	}
	if err != nil {
		writeError(w, "", storeError(err))
		return
	}
	tok := a.signer.Issue(ep.ID, a.tokenTTL)
	base := a.baseURL(r) + "/e/" + ep.ID
	writeJSON(w, http.StatusCreated, CreatedEpisode{ID: ep.ID, Token: tok, Env: map[string]string{
		"OPENAI_BASE_URL":    base + "/v1",
		"OPENAI_API_KEY":     tok,
		"ANTHROPIC_BASE_URL": base,
		"ANTHROPIC_API_KEY":  tok,
	}})
}

// createEpisode stores ep unless it exists. A store that creates
// atomically ([recorder.Creator]: both backends) gives one winner across
// every replica sharing it; for any other the check and put are serialised
// on this replica only.
func (a *episodeAPI) createEpisode(ctx context.Context, ep *recorder.Episode) error {
	if _, ok := a.store.(recorder.Creator); !ok {
		a.createMu.Lock()
		defer a.createMu.Unlock()
	}
	return recorder.CreateEpisode(ctx, a.store, ep)
}

func (a *episodeAPI) baseURL(r *http.Request) string {
	if a.publicURL != "" {
		return strings.TrimSuffix(a.publicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

type finishReq struct {
	Reward *float64        `json:"reward"`
	Status string          `json:"status"`
	Info   json.RawMessage `json:"info"`
}

func (a *episodeAPI) finish(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var req finishReq
	if e := decodeJSON(r, &req); e != nil {
		writeError(w, "", e)
		return
	}
	switch req.Status {
	case recorder.StatusSuccess, recorder.StatusFailure, recorder.StatusError, recorder.StatusTimeout:
	default:
		writeError(w, "", badRequest("status "+quote(req.Status)+" is not one of success, failure, error, timeout"))
		return
	}
	sum, err := a.store.Episode(r.Context(), id)
	if err != nil {
		writeError(w, "", storeError(err))
		return
	}
	if sum.Status != recorder.StatusRunning && sum.Status != "" {
		writeError(w, "", &Error{Status: http.StatusConflict, Type: "conflict", Message: "episode " + id + " already finished with status " + sum.Status})
		return
	}
	now := time.Now().UTC()
	ep := sum.Episode
	if ep.CreatedAt.IsZero() {
		ep.CreatedAt = now
	}
	ep.Status, ep.Reward, ep.Info, ep.FinishedAt = req.Status, req.Reward, req.Info, &now
	if err := a.store.PutEpisode(r.Context(), &ep); err != nil {
		writeError(w, "", storeError(err))
		return
	}
	a.finished.add(id)
	a.publishFinished(r.Context(), id)
	sum.Episode = ep
	writeJSON(w, http.StatusOK, sum)
}

func (a *episodeAPI) appendEvent(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var raw json.RawMessage
	if e := decodeJSON(r, &raw); e != nil {
		writeError(w, "", e)
		return
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Type == "" {
		writeError(w, "", badRequest(`an event is a JSON object with a non-empty "type"`))
		return
	}
	if _, err := a.store.Episode(r.Context(), id); err != nil {
		writeError(w, "", storeError(err))
		return
	}
	ev := &recorder.Event{EpisodeID: id, Type: head.Type, At: time.Now().UTC(), Data: raw}
	seq, err := a.store.AppendEvent(r.Context(), ev)
	if err != nil {
		writeError(w, "", storeError(err))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"episode_id": id, "seq": seq, "at": ev.At})
}

func (a *episodeAPI) events(w http.ResponseWriter, r *http.Request) {
	evs, err := a.store.Events(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, "", storeError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": nonNil(evs)})
}

func (a *episodeAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := recorder.Filter{TaskID: q.Get("task_id"), GroupID: q.Get("group_id"), Status: q.Get("status"), Cursor: q.Get("cursor")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeError(w, "", badRequest("limit "+quote(s)+" is not a non-negative integer"))
			return
		}
		f.Limit = n
	}
	eps, next, err := a.store.ListEpisodes(r.Context(), f)
	if err != nil {
		writeError(w, "", storeError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"episodes": nonNil(eps), "next_cursor": next})
}

func (a *episodeAPI) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	sum, err := a.store.Episode(r.Context(), id)
	if err != nil {
		writeError(w, "", storeError(err))
		return
	}
	if v, _ := strconv.ParseBool(r.URL.Query().Get("calls")); !v {
		writeJSON(w, http.StatusOK, sum)
		return
	}
	calls, bad, err := recorder.CallsChecked(r.Context(), a.store, id)
	if err != nil {
		writeError(w, "", storeError(err))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		*recorder.EpisodeSummary
		CallList    []*recorder.Call       `json:"call_list"`
		Quarantined []recorder.Quarantined `json:"quarantined,omitempty"`
	}{sum, nonNil(calls), bad})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func decodeJSON(r *http.Request, v any) *Error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body is not the JSON this endpoint takes: " + err.Error())
	}
	return nil
}

func badRequest(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: msg}
}

func storeError(err error) *Error {
	if errors.Is(err, recorder.ErrNotFound) {
		return &Error{Status: http.StatusNotFound, Type: "not_found", Message: "no such episode"}
	}
	return &Error{Status: http.StatusServiceUnavailable, Type: "store_unavailable", Message: "episode store: " + err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, "", &Error{Status: http.StatusInternalServerError, Type: "internal", Message: err.Error()})
		return
	}
	// Records written before bodies were kept as base64 may hold invalid
	// UTF-8 inside JSON strings; what the API emits is always valid JSON.
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func newEpisodeID() string {
	var b [12]byte
	rand.Read(b[:])
	return "ep_" + hex.EncodeToString(b[:])
}

// finishedCache remembers episodes known to be finished, whose tokens are
// revoked. Finished is final, so entries never go stale; the cache is
// bounded by dropping everything when full (a miss only costs a lookup).
type finishedCache struct {
	mu  sync.Mutex // guards following
	ids map[string]struct{}
	max int
}

func newFinishedCache(max int) *finishedCache {
	return &finishedCache{ids: make(map[string]struct{}), max: max}
}

func (c *finishedCache) add(id string) {
	c.mu.Lock()
	if len(c.ids) >= c.max {
		clear(c.ids)
	}
	c.ids[id] = struct{}{}
	c.mu.Unlock()
}

func (c *finishedCache) has(id string) bool {
	c.mu.Lock()
	_, ok := c.ids[id]
	c.mu.Unlock()
	return ok
}
