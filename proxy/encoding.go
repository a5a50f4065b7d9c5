package proxy

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// errDecodedTooLarge is returned by [decodeBody] when a body inflates past
// its limit: a compression bomb, or a body the limit does not allow.
var errDecodedTooLarge = errors.New("decoded body exceeds the limit")

// maxDecodeRatio and ratioFloor form the ratio guard of request bodies: a
// body may decode to at most max(ratioFloor, maxDecodeRatio x its encoded
// size), and never past --max-body. Chat requests gzip 5-15x; a 1 MB gzip
// of 1 GiB of zeros is ~1000x, so it is refused after 100 MB of output
// instead of being inflated whole (the proxy once grew to 5.9 GB on one).
const (
	maxDecodeRatio = 100
	ratioFloor     = 8 << 20
)

// requestDecodeLimit is how far a request body of n encoded bytes may
// inflate under max.
func requestDecodeLimit(n int, limit int64) int64 {
	return min(limit, max(ratioFloor, int64(n)*maxDecodeRatio))
}

// zstdDecs recycles streaming zstd decoders: a streaming decode can stop at
// a byte limit, which DecodeAll cannot without a buffer of the limit's size.
var zstdDecs = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
	return d
}}

// decodeBody undoes a Content-Encoding for the record, producing at most
// limit bytes (errDecodedTooLarge past that). The bytes forwarded are never
// the decoded ones unless the proxy patched the body.
func decodeBody(enc string, b []byte, limit int64) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return b, nil
	case "zstd":
		d := zstdDecs.Get().(*zstd.Decoder)
		defer zstdDecs.Put(d)
		if err := d.Reset(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("zstd body: %w", err)
		}
		return readLimited(d, limit, "zstd")
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		return readLimited(zr, limit, "gzip")
	case "deflate":
		zr, err := zlib.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("deflate body: %w", err)
		}
		return readLimited(zr, limit, "deflate")
	}
	return nil, fmt.Errorf("content-encoding %q is not supported for recording", enc)
}

// readLimited reads r to its end, failing with errDecodedTooLarge as soon
// as it has produced more than limit bytes.
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s body: %w", what, err)
	}
	if n > limit {
		return nil, fmt.Errorf("%s body: %w (%d bytes)", what, errDecodedTooLarge, limit)
	}
	return buf.Bytes(), nil
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
