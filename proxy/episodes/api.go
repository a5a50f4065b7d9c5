package episodes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/orchard-rl/orchard/recorder"
)

type createReq struct {
	ID       string          `json:"id"`
	TaskID   string          `json:"task_id"`
	GroupID  string          `json:"group_id"`
	Metadata json.RawMessage `json:"metadata"`
}

// Created is the reply to POST /orchard/v1/episodes.
type Created struct {
	ID    string            `json:"id"`
	Token string            `json:"token"`
	Env   map[string]string `json:"env"`
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var req createReq
	if e := decodeJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.ID == "" {
		req.ID = newEpisodeID()
	} else if err := recorder.CheckEpisodeID(req.ID); err != nil {
		writeError(w, badRequest(err.Error()))
		return
	}
	ep := &recorder.Episode{ID: req.ID, TaskID: req.TaskID, GroupID: req.GroupID, Metadata: req.Metadata,
		CreatedAt: time.Now().UTC(), Status: recorder.StatusRunning}
	err := h.createEpisode(r.Context(), ep)
	if errors.Is(err, recorder.ErrExists) {
		writeError(w, newError(http.StatusConflict, "conflict", "episode "+req.ID+" already exists"))
		return
	}
	if err != nil {
		writeError(w, storeError(err))
		return
	}
	tok := h.opts.Signer.Issue(ep.ID, h.opts.TokenTTL)
	base := h.baseURL(r) + "/e/" + ep.ID
	writeJSON(w, http.StatusCreated, Created{ID: ep.ID, Token: tok, Env: map[string]string{
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
func (h *Handler) createEpisode(ctx context.Context, ep *recorder.Episode) error {
	if _, ok := h.opts.Store.(recorder.Creator); !ok {
		h.createMu.Lock()
		defer h.createMu.Unlock()
	}
	return recorder.CreateEpisode(ctx, h.opts.Store, ep)
}

func (h *Handler) baseURL(r *http.Request) string {
	if h.opts.PublicURL != "" {
		return strings.TrimSuffix(h.opts.PublicURL, "/")
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

func (h *Handler) finish(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var req finishReq
	if e := decodeJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	switch req.Status {
	case recorder.StatusSuccess, recorder.StatusFailure, recorder.StatusError, recorder.StatusTimeout:
	default:
		writeError(w, badRequest("status "+quote(req.Status)+" is not one of success, failure, error, timeout"))
		return
	}
	sum, err := h.opts.Store.Episode(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err))
		return
	}
	if sum.Finished() {
		writeError(w, newError(http.StatusConflict, "conflict", "episode "+id+" already finished with status "+sum.Status))
		return
	}
	now := time.Now().UTC()
	ep := sum.Episode
	if ep.CreatedAt.IsZero() {
		ep.CreatedAt = now
	}
	ep.Status, ep.Reward, ep.Info, ep.FinishedAt = req.Status, req.Reward, req.Info, &now
	if err := h.opts.Store.PutEpisode(r.Context(), &ep); err != nil {
		writeError(w, storeError(err))
		return
	}
	h.noteFinished(id)
	h.publishFinished(r.Context(), id)
	sum.Episode = ep
	writeJSON(w, http.StatusOK, sum)
}

func (h *Handler) appendEvent(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	var raw json.RawMessage
	if e := decodeJSON(r, &raw); e != nil {
		writeError(w, e)
		return
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Type == "" {
		writeError(w, badRequest(`an event is a JSON object with a non-empty "type"`))
		return
	}
	if _, err := h.opts.Store.Episode(r.Context(), id); err != nil {
		writeError(w, storeError(err))
		return
	}
	ev := &recorder.Event{EpisodeID: id, Type: head.Type, At: time.Now().UTC(), Data: raw}
	seq, err := h.opts.Store.AppendEvent(r.Context(), ev)
	if err != nil {
		writeError(w, storeError(err))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"episode_id": id, "seq": seq, "at": ev.At})
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	evs, err := h.opts.Store.Events(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, storeError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": nonNil(evs)})
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := recorder.Filter{TaskID: q.Get("task_id"), GroupID: q.Get("group_id"), Status: q.Get("status"), Cursor: q.Get("cursor")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeError(w, badRequest("limit "+quote(s)+" is not a non-negative integer"))
			return
		}
		f.Limit = n
	}
	eps, next, err := h.opts.Store.ListEpisodes(r.Context(), f)
	if err != nil {
		writeError(w, storeError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"episodes": nonNil(eps), "next_cursor": next})
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	sum, err := h.opts.Store.Episode(r.Context(), id)
	if err != nil {
		writeError(w, storeError(err))
		return
	}
	if v, _ := strconv.ParseBool(r.URL.Query().Get("calls")); !v {
		writeJSON(w, http.StatusOK, sum)
		return
	}
	calls, bad, err := recorder.CallsChecked(r.Context(), h.opts.Store, id)
	if err != nil {
		writeError(w, storeError(err))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		*recorder.EpisodeSummary
		CallList    []*recorder.Call       `json:"call_list"`
		Quarantined []recorder.Quarantined `json:"quarantined,omitempty"`
	}{sum, nonNil(calls), bad})
}

// newEpisodeID returns a random id for an episode created without one.
func newEpisodeID() string {
	var b [12]byte
	rand.Read(b[:])
	return "ep_" + hex.EncodeToString(b[:])
}
