package proxy_test

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestCompressedRequests: a compressed body goes upstream as sent when the
// proxy does not patch it, decoded (and labelled so) when it does, and is
// recorded decoded either way.
func TestCompressedRequests(t *testing.T) {
	e := newEnv(t, nil)
	plain := []byte(`{"model":"text","stream":true,"input":"hi"}`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	enc, _ := zstd.NewWriter(nil)
	chat := []byte(`{"model":"text","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	zchat := enc.EncodeAll(chat, nil)
	enc.Close()

	tests := []struct {
		name, path, encoding string
		body, plain          []byte
		wantUpEncoding       string
		wantUpBody           []byte // nil: the patched, decoded body
	}{
		{"gzip responses, untouched", "/responses", "gzip", gz.Bytes(), plain, "gzip", gz.Bytes()},
		{"zstd chat, patched", "/chat/completions", "zstd", zchat, chat, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, "POST", e.Proxy.URL+"/v1"+tt.path, map[string]string{"Content-Encoding": tt.encoding, "User-Agent": tt.name}, tt.body)
			if r.Status != 200 {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			reqs := e.Up.Requests()
			got := reqs[len(reqs)-1]
			if ce := got.Header.Get("Content-Encoding"); ce != tt.wantUpEncoding {
				t.Errorf("upstream Content-Encoding %q, want %q", ce, tt.wantUpEncoding)
			}
			if tt.wantUpBody != nil && !bytes.Equal(got.Body, tt.wantUpBody) {
				t.Errorf("upstream body changed")
			}
			if tt.wantUpBody == nil && !bytes.Contains(got.Body, []byte(`"include_usage":true`)) {
				t.Errorf("patched body not sent decoded: %q", got.Body)
			}
			c := e.Sink.ForHarness(t, tt.name)
			if !bytes.Equal(c.Request, tt.plain) || c.RequestRaw {
				t.Errorf("recorded request %q, want %q", c.Request, tt.plain)
			}
		})
	}
}
