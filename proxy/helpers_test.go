package proxy_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/proxy/proxytest"
)

type env = proxytest.Env

var (
	do      = proxytest.Do
	mustURL = proxytest.MustURL
	newSink = proxytest.NewSink
)

func newEnv(t *testing.T, mod func(*proxy.Options)) *env { return proxytest.New(t, mod) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %v: %.200s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %v: %.200s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}
