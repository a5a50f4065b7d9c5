package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// NewBareProxy returns the floor every proxy is compared with: a stdlib
// httputil.ReverseProxy with FlushInterval -1 and a transport that keeps as
// many idle upstream connections as orchard's does, so that connection reuse
// is not what the comparison measures. It records nothing.
//
// It reads the request body into memory before forwarding, as orchard
// does. Streamed through, the stdlib cuts a few percent of the responses:
// writing the response headers makes the server close the inbound body,
// the transport's final length-check read of that body then fails, and the
// transport tears down the upstream connection mid-stream ("read error
// during body copy: use of closed network connection", the client gets
// unexpected EOF).
func NewBareProxy(upstream *url.URL) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = ""
		},
		FlushInterval: -1,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		if r.ContentLength > 0 {
			body.Grow(int(min(r.ContentLength, 64<<20)))
		}
		if _, err := body.ReadFrom(r.Body); err != nil {
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(&body)
		r.ContentLength = int64(body.Len())
		rp.ServeHTTP(w, r)
	})
}

// ServeBare runs [NewBareProxy] for upstream on addr until ctx ends: the
// `orchard-bench bare-proxy` process.
func ServeBare(ctx context.Context, addr, upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("upstream %q: want an http base URL", upstream)
	}
	return serve(ctx, addr, NewBareProxy(u))
}
