package proxy

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// zstdDec decodes whole zstd bodies; DecodeAll is safe for concurrent use.
var zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))

// decodeBody undoes a Content-Encoding for the record. The bytes forwarded
// are never the decoded ones unless the proxy patched the body.
func decodeBody(enc string, b []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return b, nil
	case "zstd":
		return zstdDec.DecodeAll(b, nil)
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		return io.ReadAll(zr)
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("deflate body: %w", err)
		}
		return io.ReadAll(zr)
	}
	return nil, fmt.Errorf("content-encoding %q is not supported for recording", enc)
}

// recordableEncodings keeps the codings of an Accept-Encoding value that the
// recorder can decode, so a compressed response can still be recorded. The
// client gets one of the codings it offered either way.
func recordableEncodings(ae string) string {
	var keep []string
	parts := strings.Split(ae, ",")
	for _, part := range parts {
		name, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip", "zstd", "deflate", "identity":
			keep = append(keep, strings.TrimSpace(part))
		}
	}
	switch len(keep) {
	case 0:
		return "identity"
	case len(parts):
		return ae
	}
	return strings.Join(keep, ", ")
}
