package episodes

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
)

// newError is a failure the episode API answers, written by
// [proxy.WriteError] in OpenAI's error shape, as the proxy answers its own.
func newError(status int, typ, msg string) *proxy.Error {
	return &proxy.Error{Status: status, Type: typ, Message: msg}
}

func writeError(w http.ResponseWriter, e *proxy.Error) { proxy.WriteError(w, "", e) }

func unauthorized(msg string) *proxy.Error {
	return newError(http.StatusUnauthorized, "authentication_error", msg)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func decodeJSON(r *http.Request, v any) *proxy.Error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body is not the JSON this endpoint takes: " + err.Error())
	}
	return nil
}

func badRequest(msg string) *proxy.Error {
	return newError(http.StatusBadRequest, "invalid_request_error", msg)
}

func storeError(err error) *proxy.Error {
	if errors.Is(err, recorder.ErrNotFound) {
		return newError(http.StatusNotFound, "not_found", "no such episode")
	}
	return newError(http.StatusServiceUnavailable, "store_unavailable", "episode store: "+err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, newError(http.StatusInternalServerError, "internal", err.Error()))
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
