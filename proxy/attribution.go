package proxy

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/orchard-rl/orchard/recorder"
)

// Verifier checks the API keys clients present for episode tokens. It is
// safe for concurrent use.
type Verifier interface {
	// Verify returns the episode of credential when it is a valid episode
	// token (genuine, unexpired, its episode still running); "" and a nil
	// error when credential is no episode token at all (a harness's own
	// key, which goes upstream); and otherwise an error, whose text the
	// client gets with a 401. It is called on the request path, so it
	// bounds any lookup it makes.
	Verify(ctx context.Context, credential string) (episode string, err error)
}

// VerifierFunc adapts a function to [Verifier].
type VerifierFunc func(ctx context.Context, credential string) (string, error)

// Verify calls f(ctx, credential).
func (f VerifierFunc) Verify(ctx context.Context, credential string) (string, error) {
	return f(ctx, credential)
}

// attribution is who a request belongs to.
type attribution struct {
	episode   string
	viaToken  bool // the client's credential was an episode token
	credKind  int  // which header carried the client's credential
	credValue string
}

const (
	credNone = iota
	credBearer
	credAPIKey
)

// attribute resolves a request's episode from, in order, the URL path
// (/e/{episode}/...), the X-Orchard-Episode header and an episode token in
// Authorization or x-api-key. A token wins over nothing but must agree with
// a path or header episode: a token for episode A never writes into B.
func (h *Handler) attribute(r *http.Request) (attribution, *Error) {
	var a attribution
	a.credKind, a.credValue = credential(r.Header)
	claimed := chi.URLParam(r, "episode")
	if hv := r.Header.Get(EpisodeHeader); hv != "" {
		if claimed != "" && claimed != hv {
			return a, &Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
				Message: "the URL names episode " + claimed + " but the " + EpisodeHeader + " header names " + hv + "; send one"}
		}
		claimed = hv
	}
	if claimed != "" {
		if err := recorder.CheckEpisodeID(claimed); err != nil {
			return a, badRequest(err.Error())
		}
	}
	ep, err := h.verify(r, a.credValue)
	switch {
	case err != nil:
		return a, unauthorized(err.Error())
	case ep != "" && claimed != "" && claimed != ep:
		return a, unauthorized("the episode token is for another episode than " + claimed)
	case ep != "":
		a.episode, a.viaToken = ep, true
		return a, nil
	case h.opts.RequireToken:
		return a, unauthorized("this proxy requires an episode token as the API key; create an episode with POST /orchard/v1/episodes and use its token")
	}
	a.episode = claimed
	if a.episode == "" {
		a.episode = recorder.Unattributed
	}
	return a, nil
}

// verify asks Options.Verifier about the client's credential, when both
// are there.
func (h *Handler) verify(r *http.Request, cred string) (string, error) {
	if h.opts.Verifier == nil || cred == "" {
		return "", nil
	}
	return h.opts.Verifier.Verify(r.Context(), cred)
}

func unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: "authentication_error", Message: msg}
}

// credential returns the client's API key and the header that carried it.
func credential(h http.Header) (int, string) {
	if v := h.Get("Authorization"); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return credBearer, strings.TrimSpace(v[7:])
		}
		return credBearer, ""
	}
	if v := h.Get("X-Api-Key"); v != "" {
		return credAPIKey, v
	}
	return credNone, ""
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + s + `"`
}

// hasDotSegment reports whether the slash-separated path p has a "." or
// ".." segment. Such a path is refused rather than forwarded: the upstream
// (or a proxy before it) would resolve it to another route than the one the
// proxy recorded and authorised.
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
