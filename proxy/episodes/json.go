package episodes

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/orchard-rl/orchard/recorder"
)

// apiError is a failure the episode API answers, written by [writeError].
type apiError struct {
	status int
	typ    string // machine-readable kind, e.g. "invalid_request_error"
	msg    string // what happened and what to do about it
}

// writeError writes e in OpenAI's error shape, as the proxy does.
func writeError(w http.ResponseWriter, e *apiError) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": e.msg, "type": e.typ, "code": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Orchard-Error", "1") // tells orchard's answers apart from an upstream's
	w.WriteHeader(e.status)
	w.Write(append(b, '\n'))
}

func unauthorized(msg string) *apiError {
	return &apiError{http.StatusUnauthorized, "authentication_error", msg}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func decodeJSON(r *http.Request, v any) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body is not the JSON this endpoint takes: " + err.Error())
	}
	return nil
}

func badRequest(msg string) *apiError {
	return &apiError{http.StatusBadRequest, "invalid_request_error", msg}
}

func storeError(err error) *apiError {
	if errors.Is(err, recorder.ErrNotFound) {
		return &apiError{http.StatusNotFound, "not_found", "no such episode"}
	}
	return &apiError{http.StatusServiceUnavailable, "store_unavailable", "episode store: " + err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, &apiError{http.StatusInternalServerError, "internal", err.Error()})
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

// quote quotes s for a message, cut to 64 bytes.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + s + `"`
}
