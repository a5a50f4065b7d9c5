package proxy_test

import (
	"strings"
	"testing"
)

// TestRecordKeepsQuery: the record's path is what the client asked for,
// query string included, and the query reaches the upstream unchanged.
func TestRecordKeepsQuery(t *testing.T) {
	e := newEnv(t, nil)
	body := []byte(`{"model":"text","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"query", "/e/ep-q/v1/messages?beta=true", "/e/ep-q/v1/messages?beta=true"},
		{"no query", "/e/ep-q/v1/messages", "/e/ep-q/v1/messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ua := "query-" + tc.name
			r := do(t, "POST", e.Proxy.URL+tc.path, map[string]string{"User-Agent": ua}, body)
			if r.Status != 200 {
				t.Fatalf("call: %d %s", r.Status, r.Body)
			}
			if got := e.Sink.ForHarness(t, ua).Path; got != tc.want {
				t.Errorf("record path = %q, want %q", got, tc.want)
			}
			reqs := e.Up.Requests()
			_, want, _ := strings.Cut(tc.want, "?")
			if got := reqs[len(reqs)-1].RawQuery; got != want {
				t.Errorf("upstream query = %q, want %q", got, want)
			}
		})
	}
}
