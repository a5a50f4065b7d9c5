package proxy_test

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/proxy"
	"github.com/orchard-rl/orchard/recorder"
)

// bombs returns, per Content-Encoding, a body of about 1 MB that inflates
// to 1 GiB of zeros. gzip and zstd are 1024 concatenated members of 1 MiB
// each (both formats allow that); deflate repeats a flushed block that
// encodes 1 MiB of zeros against a window of zeros.
func bombs(t *testing.T) map[string][]byte {
	t.Helper()
	zeros := make([]byte, 1<<20)
	member := func(w interface {
		Write([]byte) (int, error)
		Close() error
	}, buf *bytes.Buffer) []byte {
		w.Write(zeros)
		w.Close()
		return buf.Bytes()
	}
	var gz, zs bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw, _ := zstd.NewWriter(&zs, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	out := map[string][]byte{
		"gzip": bytes.Repeat(member(gw, &gz), 1024),
		"zstd": bytes.Repeat(member(zw, &zs), 1024),
	}
	var df bytes.Buffer
	fw := zlib.NewWriter(&df)
	fw.Write(zeros)
	fw.Flush()
	head := len(df.Bytes())
	fw.Write(zeros)
	fw.Flush()
	block := bytes.Clone(df.Bytes()[head:])
	out["deflate"] = append(bytes.Clone(df.Bytes()[:head]), bytes.Repeat(block, 1023)...)
	return out
}

// TestCompressionBomb: a ~1 MB body that inflates to 1 GiB is refused with
// a JSON 413 once its output passes --max-body (16 MiB here: the race
// detector makes inflating slow), never reaches the upstream, and leaves
// no record; the next call is served and recorded.
func TestCompressionBomb(t *testing.T) {
	e := newEnv(t, func(o *proxy.Options) { o.MaxBodyBytes = 16 << 20 })
	for enc, body := range bombs(t) {
		t.Run(enc, func(t *testing.T) {
			if len(body) > 2<<20 {
				t.Fatalf("bomb is %d bytes, want about 1 MB", len(body))
			}
			before := len(e.Up.Requests())
			got := do(t, "POST", e.Proxy.URL+"/e/ep-bomb/v1/chat/completions",
				map[string]string{"Content-Encoding": enc, "User-Agent": "bomb"}, body)
			if got.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d (%s), want 413", got.Status, got.Body)
			}
			if msg := gjson.GetBytes(got.Body, "error.message").String(); !strings.Contains(msg, "--max-body") {
				t.Fatalf("413 body %s does not say what to change", got.Body)
			}
			if n := len(e.Up.Requests()); n != before {
				t.Fatalf("upstream saw %d requests, want %d", n, before)
			}
		})
	}
	ok := do(t, "POST", e.Proxy.URL+"/e/ep-bomb/v1/chat/completions", map[string]string{"User-Agent": "after"},
		[]byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`))
	if ok.Status != 200 {
		t.Fatalf("call after the bombs: %d %s", ok.Status, ok.Body)
	}
	e.Sink.ForHarness(t, "after")
	if n := e.Sink.Pending(); n != 0 {
		t.Fatalf("%d records besides the good call; the bombs must leave none", n)
	}
}

// TestCompressionRatioGuard: under the default 256 MiB --max-body, a 100 KB
// gzip of 100 MiB is refused by the ratio guard (at most 100x the encoded
// size above 8 MiB), while a body that decodes to less than 8 MiB passes
// whatever its ratio.
func TestCompressionRatioGuard(t *testing.T) {
	e := newEnv(t, nil)
	var gz bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	gw.Write(make([]byte, 1<<20))
	gw.Close()
	bomb := bytes.Repeat(gz.Bytes(), 100)
	got := do(t, "POST", e.Proxy.URL+"/v1/chat/completions", map[string]string{"Content-Encoding": "gzip"}, bomb)
	if got.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d (%s), want 413", got.Status, got.Body)
	}
	msg := `{"model":"text","messages":[{"role":"user","content":"` + strings.Repeat("the quick brown fox ", 1<<16) + `"}]}`
	gz.Reset()
	gw.Reset(&gz)
	gw.Write([]byte(msg))
	gw.Close()
	ok := do(t, "POST", e.Proxy.URL+"/v1/chat/completions", map[string]string{"Content-Encoding": "gzip", "User-Agent": "honest"}, gz.Bytes())
	if ok.Status != 200 {
		t.Fatalf("honest gzip body: status %d (%s)", ok.Status, ok.Body)
	}
	if c := e.Sink.ForHarness(t, "honest"); len(c.Request) != len(msg) {
		t.Fatalf("recorded %d bytes, want the decoded %d", len(c.Request), len(msg))
	}
}

// TestDotSegmentsRefused: a path with . or .. segments is answered 400 and
// never forwarded (the upstream would resolve it to another route, with
// the upstream key attached).
func TestDotSegmentsRefused(t *testing.T) {
	e := newEnv(t, nil)
	for _, path := range []string{
		"/e/ok-1/v1/../../../etc/passwd",
		"/v1/chat/../models",
		"/v1/./chat/completions",
		"/e/ok-1/v1/chat/completions/..",
	} {
		t.Run(path, func(t *testing.T) {
			status, body := rawRequest(t, e.Proxy.Listener.Addr().String(), "POST", path, `{"model":"text"}`)
			if status != http.StatusBadRequest || !strings.Contains(body, "segment") {
				t.Fatalf("%s: status %d body %q, want 400 naming the dot segment", path, status, body)
			}
		})
	}
	if n := len(e.Up.Requests()); n != 0 {
		t.Fatalf("upstream saw %d requests, want 0", n)
	}
}

// rawRequest writes one HTTP/1.1 request with path exactly as given (Go's
// client would not normalise it either, but this leaves no doubt) and
// returns the status and body.
func rawRequest(t *testing.T, addr, method, path, body string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, path, len(body), body)
	var buf bytes.Buffer
	buf.ReadFrom(c)
	head, rest, _ := strings.Cut(buf.String(), "\r\n\r\n")
	var status int
	fmt.Sscanf(head, "HTTP/1.1 %d", &status)
	return status, rest
}

// TestDotAndReservedEpisodeIDs: ids made of dots and the reserved bucket
// name are refused in the URL and in the header (proxy/episodes refuses
// them on create).
func TestDotAndReservedEpisodeIDs(t *testing.T) {
	e := newEnv(t, nil)
	body := []byte(`{"model":"text","messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct{ name, path, header string }{
		{"dot in header", "/v1/chat/completions", "."},
		{"dots in header", "/v1/chat/completions", "..."},
		{"reserved in url", "/e/" + recorder.Unattributed + "/v1/chat/completions", ""},
		{"reserved in header", "/v1/chat/completions", recorder.Unattributed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.header != "" {
				hdr["X-Orchard-Episode"] = tc.header
			}
			got := do(t, "POST", e.Proxy.URL+tc.path, hdr, body)
			if got.Status != http.StatusBadRequest {
				t.Fatalf("status %d (%s), want 400", got.Status, got.Body)
			}
		})
	}
	status, _ := rawRequest(t, e.Proxy.Listener.Addr().String(), "POST", "/e/../v1/chat/completions", string(body))
	if status != http.StatusBadRequest && status != http.StatusNotFound {
		t.Fatalf("/e/../v1: status %d, want 400 or 404", status)
	}
	if n := len(e.Up.Requests()); n != 0 {
		t.Fatalf("upstream saw %d requests, want 0", n)
	}
}

// TestRequestBytesKeptExactly: JSON with invalid UTF-8 in a string and a
// binary body are recorded as base64 of the exact bytes (a JSON string
// would have turned them into U+FFFD), and the record is valid UTF-8.
func TestRequestBytesKeptExactly(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name, ua string
		body     []byte
	}{
		{"json with invalid utf-8", "badutf8", []byte("{\"model\":\"text\",\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\xfeb\"}]}")},
		{"binary", "binary", []byte("\x89PNG\r\n\x1a\n\x00\xff")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			do(t, "POST", e.Proxy.URL+"/e/ep-bytes/v1/chat/completions", map[string]string{"User-Agent": tc.ua}, tc.body)
			c := e.Sink.ForHarness(t, tc.ua)
			if !c.RequestRaw || c.RequestEncoding != recorder.EncodingBase64 {
				t.Fatalf("request_raw %v request_encoding %q, want true and base64", c.RequestRaw, c.RequestEncoding)
			}
			got, err := base64.StdEncoding.DecodeString(gjson.ParseBytes(c.Request).String())
			if err != nil || !bytes.Equal(got, tc.body) {
				t.Fatalf("recorded bytes %q (%v), want %q", got, err, tc.body)
			}
			if !utf8.Valid(c.Request) {
				t.Fatalf("recorded request is not valid UTF-8")
			}
		})
	}
}
