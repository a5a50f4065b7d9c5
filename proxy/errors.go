package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/orchard-rl/orchard/recorder"
)

// Error is a failure the proxy itself answers, written by [writeError] in
// the error format of the API the client called.
type Error struct {
	Status  int
	Type    string // machine-readable kind, e.g. "invalid_request_error"
	Message string // what happened and what to do about it
	cause   error  // the underlying failure, when there is one
}

func (e *Error) Error() string { return e.Message }

// errIdleTimeout is the cancel cause of an exchange that went quiet.
var errIdleTimeout = errors.New("upstream sent nothing for the idle timeout")

// statusFor maps an upstream failure to the status the client gets:
// a timeout is 504, anything else 502.
func statusFor(ctx context.Context, err error) int {
	if errors.Is(context.Cause(ctx), errIdleTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// WriteError writes e as JSON: Anthropic's error shape for Anthropic routes
// (api "messages*"), OpenAI's otherwise (also for api ""). It is the one
// writer of the errors orchard itself answers on the proxy's listener; the
// episode API uses it too.
func WriteError(w http.ResponseWriter, api recorder.API, e *Error) {
	var body any
	if api == recorder.APIMessages || api == recorder.APICountTokens {
		body = map[string]any{"type": "error", "error": map[string]string{"type": e.Type, "message": e.Message}}
	} else {
		body = map[string]any{"error": map[string]any{"message": e.Message, "type": e.Type, "code": nil}}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Orchard-Error", "1") // tells the proxy's answers apart from the upstream's
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}

func badRequest(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: msg}
}
