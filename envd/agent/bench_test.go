package agent

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkExecLoopback measures an exec round trip to an agent over
// loopback TCP, as envd reaches pods on Kubernetes: HTTP/1.1 keep-alive
// and cleartext HTTP/2 (what the kube backend pools). It is the agent's
// share of exec latency; the rest is the network and envd.
func BenchmarkExecLoopback(b *testing.B) {
	for _, proto := range []string{"http1", "h2c"} {
		b.Run(proto, func(b *testing.B) {
			s := New(Options{Workdir: b.TempDir()})
			ts := httptest.NewUnstartedServer(s)
			ts.Config.Protocols = new(http.Protocols)
			ts.Config.Protocols.SetHTTP1(true)
			ts.Config.Protocols.SetUnencryptedHTTP2(true)
			ts.Start()
			defer func() { ts.Close(); s.Close() }()
			tr := &http.Transport{Protocols: new(http.Protocols)}
			if proto == "h2c" {
				tr.Protocols.SetUnencryptedHTTP2(true)
			} else {
				tr.Protocols.SetHTTP1(true)
			}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			body := []byte(`{"cmd":["true"]}`)
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				res, err := c.Post(ts.URL+"/agent/v1/exec", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_ = res.Body.Close()
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
