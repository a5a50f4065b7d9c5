package main

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/orchard-rl/orchard/envd"
	"github.com/orchard-rl/orchard/envd/orchardenv"
)

// withOrchardEnv serves the Orchard Env compatible API (docs/orchard-env-compat.md)
// at the root paths Orchard's SDK composes (/sandboxes, /jobs, /health)
// beside envd's own /envd/v1 API, on the same Manager. The envd token, when
// set, is also the API key Orchard clients send in X-API-Key. The returned
// func stops the API's running jobs.
func withOrchardEnv(native http.Handler, m *envd.Manager, cfg *envdConfig, lg *slog.Logger) (http.Handler, func() error) {
	backend := orchardenv.BackendLocal
	if cfg.Backend != "local" {
		backend = orchardenv.BackendKubernetes
	}
	opts := orchardenv.Options{Manager: m, Backend: backend, Logger: lg}
	if cfg.Token != "" {
		opts.APIKeys = []string{cfg.Token}
	}
	compat := orchardenv.New(opts)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/envd/") {
			native.ServeHTTP(w, r)
			return
		}
		compat.ServeHTTP(w, r)
	})
	return h, compat.Close
}
