package envd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Sentinel outcomes callers branch on; [StatusFor] maps them to HTTP.
var (
	ErrNotFound     = errors.New("not found")
	ErrBadRequest   = errors.New("bad request")
	ErrUnavailable  = errors.New("unavailable")
	ErrUpstream     = errors.New("upstream failure")
	ErrConflict     = errors.New("conflict")
	ErrUnauthorized = errors.New("unauthorized")
)

// Error is an error with an HTTP status and a machine-readable type, the
// shape every envd and agent error body has:
// {"error":{"message":"...","type":"..."}}.
type Error struct {
	Status  int    `json:"-"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an error wrapping kind (one of the sentinels) so that
// [StatusFor] and errors.Is both work on it.
func Errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// StatusFor maps err to an HTTP status and error type; it is the single
// place where outcomes become statuses.
func StatusFor(err error) (int, string) {
	var e *Error
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, "invalid_request"
	case errors.Is(err, ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, ErrUpstream):
		return http.StatusBadGateway, "upstream_error"
	case errors.As(err, &e):
		return e.Status, e.Type
	case errors.Is(err, context.Canceled):
		return 499, "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	}
	return http.StatusInternalServerError, "internal_error"
}

// WriteError writes err as the JSON error body with the status from
// [StatusFor]. It is the only writer of error bodies in envd.
func WriteError(w http.ResponseWriter, err error) {
	status, typ := StatusFor(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]*Error{"error": {Type: typ, Message: err.Error()}})
}

// DecodeError reads an error body written by [WriteError] (or the
// proxy's identical shape) from a response with status >= 400.
func DecodeError(status int, body []byte) error {
	var env struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Message != "" {
		env.Error.Status = status
		return env.Error
	}
	msg := string(body)
	if len(msg) > 512 {
		msg = msg[:512]
	}
	return &Error{Status: status, Type: "http_error", Message: fmt.Sprintf("HTTP %d: %s", status, msg)}
}
