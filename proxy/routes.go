package proxy

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orchard-rl/orchard/recorder"
)

// EpisodeHeader names the episode of a call when the URL does not.
const EpisodeHeader = "X-Orchard-Episode"

func (h *Handler) routes() chi.Router {
	r := chi.NewRouter()
	// Claude Code probes its base URL with HEAD before the first call.
	r.Head("/", ok)
	r.Head("/e/{episode}", ok)
	r.Head("/e/{episode}/", ok)
	r.Get("/healthz", ok)
	if h.met != nil {
		r.Handle("/metrics", promhttp.HandlerFor(h.opts.Registry, promhttp.HandlerOpts{}))
	}
	r.HandleFunc("/v1/*", h.serveAPI)
	r.HandleFunc("/e/{episode}/v1/*", h.serveAPI)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, "", &Error{Status: http.StatusNotFound, Type: "not_found",
			Message: "no route for " + r.Method + " " + r.URL.Path + "; model calls go to /v1/... or /e/{episode}/v1/..."})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, "", &Error{Status: http.StatusMethodNotAllowed, Type: "method_not_allowed",
			Message: r.Method + " is not allowed on " + r.URL.Path})
	})
	return r
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// apiFor names the recorded API of a request for /v1/{rest}, or "" when the
// request is forwarded without a record.
func apiFor(method, rest string) recorder.API {
	rest = strings.TrimSuffix(rest, "/")
	switch method {
	case http.MethodPost:
		switch rest {
		case "chat/completions":
			return recorder.APIChatCompletions
		case "completions":
			return recorder.APICompletions
		case "responses":
			return recorder.APIResponses
		case "messages":
			return recorder.APIMessages
		case "messages/count_tokens":
			return recorder.APICountTokens
		case "embeddings":
			return recorder.APIEmbeddings
		}
	case http.MethodGet:
		if rest == "models" {
			return recorder.APIModels
		}
	}
	return ""
}

// isAnthropic reports whether /v1/{rest} belongs to the Anthropic API.
func isAnthropic(rest string) bool {
	return rest == "messages" || strings.HasPrefix(rest, "messages/")
}

// streamsTokens reports whether api is one whose requests the proxy may
// patch (usage in streams, token ids).
func streamsTokens(api recorder.API) bool {
	return api == recorder.APIChatCompletions || api == recorder.APICompletions
}
