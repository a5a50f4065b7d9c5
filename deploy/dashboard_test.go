package deploy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/embedded"
)

// metricName finds the metric names in a PromQL expression; label values
// are inside quotes and so are not matched as names.
var metricName = regexp.MustCompile(`\borchard_[a-z_]+\b`)

// TestDashboardMetricsExist: every metric the Grafana dashboard queries
// is served on /metrics by a proxy wired as `orchard proxy --live-lineage`
// wires it (its own collectors and the recorder pipeline's), after one
// recorded call. The lineage panel says it needs --live-lineage.
func TestDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile("grafana/orchard-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	served := scrapeProxy(t)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricName.FindAllString(tg.Expr, -1) {
				n++
				if !strings.Contains(served, "\n"+name+"{") && !strings.Contains(served, "\n"+name+" ") {
					t.Errorf("panel %q queries %s, which /metrics does not serve", p.Title, name)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("dashboard queries %d metrics, want at least 10", n)
	}
}

// scrapeProxy records one chat call through a proxy and returns /metrics.
func scrapeProxy(t *testing.T) string {
	t.Helper()
	up := llmtest.NewServer(llmtest.Options{})
	defer up.Close()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pipe := recorder.NewPipeline(st, recorder.PipelineOptions{SpillDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.Start(ctx) }()
	defer func() { cancel(); <-done }()
	reg := prometheus.NewRegistry()
	reg.MustRegister(pipe.Collectors()...)
	base, _ := url.Parse(up.URL() + "/v1")
	h := proxy.New(proxy.Options{Upstream: &proxy.Upstream{BaseURL: base}, Sink: pipe, Registry: reg, Logger: slog.New(slog.DiscardHandler),
		LiveLineage: true})
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	res, err := http.Post(srv.URL+"/e/ep-dash/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	srv.Close()
	h.Close() // hands the call's record over, so its metrics are counted
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return "\n" + rec.Body.String()
}
