package proxy

import (
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/orchard-rl/orchard/recorder"
)

// TokenVerifier checks episode tokens presented as API keys.
type TokenVerifier interface {
	// Verify returns the episode a token is bound to. It returns an error
	// wrapping ErrNotToken when s does not look like an episode token at all
	// (a harness's own key), and another error when it looks like one but is
	// forged, expired or revoked.
	Verify(s string) (episodeID string, err error)
}

// ErrNotToken is wrapped by [TokenVerifier] errors for strings that are not
// episode tokens.
var ErrNotToken = errors.New("not an episode token")

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
		if e := checkEpisodeID(claimed); e != nil {
			return a, e
		}
	}
	if h.opts.Tokens != nil && a.credValue != "" {
		ep, err := h.opts.Tokens.Verify(a.credValue)
		switch {
		case err == nil:
			if claimed != "" && claimed != ep {
				return a, unauthorized("the episode token is for another episode than " + claimed)
			}
			if h.eps != nil && h.eps.revoked(r.Context(), ep) {
				return a, unauthorized("episode " + ep + " has finished; its token is revoked")
			}
			a.episode, a.viaToken = ep, true
			return a, nil
		case !errors.Is(err, ErrNotToken):
			return a, unauthorized("episode token rejected: " + err.Error())
		}
	}
	if h.opts.RequireToken {
		return a, unauthorized("this proxy requires an episode token as the API key; create an episode with POST /orchard/v1/episodes and use its token")
	}
	a.episode = claimed
	if a.episode == "" {
		a.episode = recorder.Unattributed
	}
	return a, nil
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

// checkEpisodeID returns a 400 naming what is wrong with an episode id a
// client chose, or nil: it must be valid and not the reserved bucket of
// calls without an episode (naming it would merge into that bucket).
func checkEpisodeID(id string) *Error {
	if !validEpisodeID(id) {
		return badRequest("episode id " + quote(id) + " is not valid: use 1-128 characters of A-Z a-z 0-9 . _ : -, not only dots")
	}
	if id == recorder.Unattributed {
		return badRequest("episode id " + quote(id) + " is reserved for calls that name no episode; choose another")
	}
	return nil
}

// validEpisodeID reports whether s is usable as an episode id: it appears
// in URLs, Redis keys and file names, so it is not made of dots only
// ("." and ".." are path segments clients normalise away).
func validEpisodeID(s string) bool {
	if len(s) == 0 || len(s) > 128 || strings.Trim(s, ".") == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
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
