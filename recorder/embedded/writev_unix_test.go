//go:build darwin || linux || openbsd

package embedded

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteAll writes more buffers than one writev takes, of every size
// from empty to 64 KB, and finds exactly their bytes in the file, in order;
// the caller's buffers are left as they were.
func TestWriteAll(t *testing.T) {
	var bufs [][]byte
	for i := range 2500 {
		n := (i * 7919) % 700
		if i%500 == 3 {
			n = 64 << 10
		}
		b := bytes.Repeat([]byte{byte(i)}, n)
		if i%311 == 0 {
			b = nil
		}
		bufs = append(bufs, b)
	}
	orig := slices.Clone(bufs)
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("head")); err != nil {
		t.Fatal(err)
	}
	if err := writeAll(f, bufs); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]byte("head"), bytes.Join(orig, nil)...); !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, want %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	for i := range bufs {
		if len(bufs[i]) != len(orig[i]) {
			t.Fatalf("buffer %d: %d bytes after writeAll, %d before", i, len(bufs[i]), len(orig[i]))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestAdvance cuts written bytes off a buffer list at every boundary and
// inside buffers; an empty buffer goes once the bytes before it are cut.
func TestAdvance(t *testing.T) {
	mk := func() [][]byte { return [][]byte{[]byte("ab"), nil, []byte("cde"), []byte("f")} }
	for n, want := range map[int]string{0: "ab||cde|f", 1: "b||cde|f", 2: "|cde|f", 3: "de|f", 5: "f", 6: ""} {
		got := advance(mk(), n)
		if s := string(bytes.Join(got, []byte("|"))); s != want {
			t.Errorf("advance(%d) = %q, want %q", n, s, want)
		}
	}
}
