package proxy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/proxy"
)

// TestVerifier: the proxy asks its one Verifier about every presented key
// and follows its answer: an episode token attributes the call (and never
// goes upstream), a harness key goes upstream, an error is a 401 carrying
// its text with nothing sent upstream.
func TestVerifier(t *testing.T) {
	v := proxy.VerifierFunc(func(_ context.Context, cred string) (string, error) {
		switch {
		case cred == "tok-ep1":
			return "ep1", nil
		case strings.HasPrefix(cred, "tok-"):
			return "", errors.New("episode token has expired")
		}
		return "", nil
	})
	chat := []byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		name, path, key string
		require         bool
		status          int
		episode, sent   string // recorded episode and the key the upstream got
		message         string // in the 401
	}{
		{"token", "/v1", "tok-ep1", false, 200, "ep1", "", ""},
		{"token and its path", "/e/ep1/v1", "tok-ep1", true, 200, "ep1", "", ""},
		{"harness key", "/e/ep2/v1", "sk-harness", false, 200, "ep2", "Bearer sk-harness", ""},
		{"rejected", "/e/ep1/v1", "tok-old", false, 401, "", "", "episode token has expired"},
		{"token of another episode", "/e/ep2/v1", "tok-ep1", false, 401, "", "", "another episode than ep2"},
		{"required", "/e/ep2/v1", "sk-harness", true, 401, "", "", "requires an episode token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *proxy.Options) { o.Verifier, o.RequireToken = v, tc.require })
			r := do(t, "POST", e.Proxy.URL+tc.path+"/chat/completions", map[string]string{"Authorization": "Bearer " + tc.key}, chat)
			if r.Status != tc.status || !strings.Contains(string(r.Body), tc.message) {
				t.Fatalf("status %d %s, want %d with %q", r.Status, r.Body, tc.status, tc.message)
			}
			reqs := e.Up.Requests()
			if tc.status != 200 {
				if len(reqs) != 0 {
					t.Errorf("a refused call reached the upstream")
				}
				return
			}
			if got := reqs[0].Header.Get("Authorization"); got != tc.sent {
				t.Errorf("upstream got Authorization %q, want %q", got, tc.sent)
			}
			if got := e.Sink.Next(t).EpisodeID; got != tc.episode {
				t.Errorf("recorded under %q, want %q", got, tc.episode)
			}
		})
	}
}
