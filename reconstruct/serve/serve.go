package serve

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/orchard-rl/orchard/reconstruct"
	"github.com/orchard-rl/orchard/recorder"
)

// Options configures [New].
type Options struct {
	Source reconstruct.Source // required: the store the proxy records into
	// AdminToken, when set, is required as "Authorization: Bearer <token>"
	// (or X-API-Key), as on the episode API.
	AdminToken string
	// Next serves every other request; nil answers them 404.
	Next http.Handler
}

// Handler serves the samples route and hands the rest to Next.
type Handler struct{ opts Options }

// New returns a Handler for opts.
func New(opts Options) *Handler {
	if opts.Source == nil {
		panic("serve.New: nil Source")
	}
	opts.defaults()
	return &Handler{opts: opts}
}

// defaults fills the zero fields of o.
func (o *Options) defaults() {
	if o.Next == nil {
		o.Next = http.NotFoundHandler()
	}
}

const prefix, suffix = "/orchard/v1/episodes/", "/samples"

// ServeHTTP answers GET /orchard/v1/episodes/{id}/samples[?format=] and
// passes everything else to Next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, prefix)
	if ok {
		id, ok = strings.CutSuffix(id, suffix)
	}
	if !ok || id == "" || strings.Contains(id, "/") {
		h.opts.Next.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path+"; use GET")
		return
	}
	if !h.authorized(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "the episode API needs the admin token: send Authorization: Bearer <admin token>")
		return
	}
	h.samples(w, r, id)
}

func (h *Handler) authorized(r *http.Request) bool {
	if h.opts.AdminToken == "" {
		return true
	}
	tok := r.Header.Get("X-Api-Key")
	if v := r.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		tok = strings.TrimSpace(v[7:])
	}
	return subtle.ConstantTimeCompare([]byte(tok), []byte(h.opts.AdminToken)) == 1
}

// Answer is the body of a samples response.
type Answer struct {
	EpisodeID string            `json:"episode_id"`
	Format    string            `json:"format"`
	Status    string            `json:"status"`
	Reward    *float64          `json:"reward"`
	Calls     int               `json:"calls"`
	Samples   []json.RawMessage `json:"samples"`
}

func (h *Handler) samples(w http.ResponseWriter, r *http.Request, id string) {
	format := r.URL.Query().Get("format")
	if format == "" {
		format = reconstruct.FormatTrajectories
	}
	if !slices.Contains(reconstruct.Formats, format) {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("format %q: want one of %s", format, strings.Join(reconstruct.Formats, ", ")))
		return
	}
	sum, err := h.opts.Source.Episode(r.Context(), id)
	switch {
	case errors.Is(err, recorder.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "episode "+id+" not found")
		return
	case err != nil:
		writeError(w, http.StatusBadGateway, "store_error", "read episode "+id+": "+err.Error())
		return
	case !sum.Finished():
		writeError(w, http.StatusConflict, "conflict", "episode "+id+" is still running: finish it first (POST /orchard/v1/episodes/"+id+"/finish)")
		return
	}
	var buf bytes.Buffer
	if _, err := reconstruct.Export(r.Context(), h.opts.Source, &buf, reconstruct.Options{Format: format, Episodes: []string{id}, Workers: 1}); err != nil {
		writeError(w, http.StatusInternalServerError, "export_error", "rebuild samples of episode "+id+": "+err.Error())
		return
	}
	ans := Answer{EpisodeID: id, Format: format, Status: sum.Status, Reward: sum.Reward, Calls: sum.Calls, Samples: splitLines(buf.Bytes())}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// splitLines returns the non-empty lines of JSONL b.
func splitLines(b []byte) []json.RawMessage {
	out := []json.RawMessage{}
	for line := range bytes.Lines(b) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			out = append(out, json.RawMessage(line))
		}
	}
	return out
}

// writeError writes the proxy's error shape: {"error":{"message","type"}}.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": typ, "message": msg}})
}
