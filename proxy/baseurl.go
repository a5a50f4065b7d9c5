package proxy

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/orchard-rl/orchard/recorder"
)

// baseURLExample is what every base URL hint shows.
const baseURLExample = "http://127.0.0.1:8000/v1"

// versionSegment matches an API version path segment: v1, v2, v1beta.
var versionSegment = regexp.MustCompile(`^v[0-9]+([a-z]+[0-9]*)?$`)

// apiSuffixes are the API paths the proxy appends to a base URL.
var apiSuffixes = []string{"/chat/completions", "/completions", "/responses", "/messages", "/embeddings", "/models"}

// baseURLProblem says what looks wrong with u as a base URL, or "". A
// base URL without its version path (/v1) is the usual first-run mistake:
// every call then gets the upstream's 404.
func baseURLProblem(u *Upstream) string {
	p := strings.TrimSuffix(u.BaseURL.Path, "/")
	for _, s := range apiSuffixes {
		if strings.HasSuffix(p, s) {
			return "it ends with the API path " + s + ", which the proxy appends itself; give the base URL, e.g. " + baseURLExample
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if versionSegment.MatchString(seg) {
			return ""
		}
	}
	return "it has no version path such as /v1, so /v1/chat/completions is sent to " + u.String() + "/chat/completions; give the base URL with its version, e.g. " + baseURLExample
}

// warnUpstreams logs each configured upstream whose base URL looks wrong.
func (h *Handler) warnUpstreams() {
	ups := []*Upstream{h.opts.Upstream}
	if h.opts.Anthropic != h.opts.Upstream {
		ups = append(ups, h.opts.Anthropic)
	}
	for _, u := range h.opts.Routes {
		ups = append(ups, u)
	}
	for _, u := range ups {
		if p := baseURLProblem(u); p != "" {
			h.log.Warn("upstream base URL looks wrong", "upstream", u.String(), "problem", p)
		}
	}
}

// notFoundHint explains an upstream 404 for a model call in its record,
// and logs it once per Handler: it is a wrong model name or, on a first
// run, a base URL without its version path.
func (h *Handler) notFoundHint(c *recorder.Call) {
	if c.Status != http.StatusNotFound || c.API == recorder.APIModels {
		return
	}
	hint := "the upstream answered 404: check the model name, and that the upstream base URL " + c.Upstream +
		" includes its version path, e.g. " + baseURLExample
	if c.Error == "" {
		c.Error = hint
	}
	if h.warned404.CompareAndSwap(false, true) {
		h.log.Warn("upstream answered 404 for a model call", "upstream", c.Upstream, "path", c.Path, "hint", hint)
	}
}
