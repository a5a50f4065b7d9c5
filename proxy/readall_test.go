package proxy

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAll: readAll returns the body whole, up to the limit, with its
// reader's error, whatever length was declared and however the reader
// splits it; a body of its declared length fills the one buffer sized for
// it (declared plus the byte that shows the end) without a second one.
func TestReadAll(t *testing.T) {
	body := strings.Repeat("0123456789", 500)
	wrap := map[string]func(io.Reader) io.Reader{
		"plain":     func(r io.Reader) io.Reader { return r },
		"one byte":  iotest.OneByteReader,
		"data+EOF":  iotest.DataErrReader,
		"half read": iotest.HalfReader,
	}
	for name, w := range wrap {
		for _, declared := range []int64{-1, 0, 1, 600, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 7, 1 << 40} {
			for _, limit := range []int64{int64(len(body)) + 1, 100} {
				got, err := readAll(w(strings.NewReader(body)), declared, limit)
				want := body[:min(int64(len(body)), limit)]
				if err != nil || string(got) != want {
					t.Fatalf("%s, declared %d, limit %d: %d bytes, %v; want %d bytes", name, declared, limit, len(got), err, len(want))
				}
				if declared == int64(len(body)) && limit > declared && cap(got) != len(body)+1 {
					t.Errorf("%s: a body of its declared length %d ended in a buffer of %d, want %d", name, declared, cap(got), len(body)+1)
				}
			}
		}
	}
	boom := errors.New("boom")
	got, err := readAll(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 3, 100)
	if !errors.Is(err, boom) || !bytes.Equal(got, []byte("abc")) {
		t.Errorf("a failing reader: %q, %v; want \"abc\", boom", got, err)
	}
}
