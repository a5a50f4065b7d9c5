package episodes_test

import (
	"testing"

	"github.com/orchard-rl/orchard/internal/llmtest"
	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/episodes"
	"github.com/orchard-rl/orchard/proxy/proxytest"
)

type (
	env   = proxytest.Env
	reply = proxytest.Reply
)

var do = proxytest.Do

const (
	upstreamKey = "sk-upstream-SECRET-9f8e7d6c"
	adminToken  = "admin-token-for-tests"
)

// newSigner returns a Signer on a fixed secret, the same on every replica.
func newSigner(t *testing.T) *episodes.Signer {
	t.Helper()
	signer, err := episodes.NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// mounted starts the proxy in secure mode, with an upstream key, and the
// episode API beside it on one listener, as cmd/orchard wires them: opts
// configure the API (Signer defaults to [newSigner]'s), mod the proxy.
func mounted(t *testing.T, opts episodes.Options, mod func(*proxy.Options)) *env {
	t.Helper()
	if opts.Signer == nil {
		opts.Signer = newSigner(t)
	}
	opts.AdminToken = adminToken
	api := episodes.New(opts)
	if err := api.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	e := proxytest.NewWrapped(t, llmtest.Options{}, func(o *proxy.Options) {
		o.Upstream.Key = upstreamKey
		o.Verifier, o.RequireToken = api, true
		if mod != nil {
			mod(o)
		}
	}, api.Beside)
	api.OnFinish(e.Handler.Forget)
	return e
}
