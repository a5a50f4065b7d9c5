package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// frameSpan is where one call's frame lies in the log.
type frameSpan struct {
	seg      int
	off, end int64
	call     *recorder.Call
}

// writeSingles writes n episodes of one call each (so that every call's
// frame decodes on its own) and returns their frames.
func writeSingles(t testing.TB, dir string, n int, opts Options) []frameSpan {
	t.Helper()
	s := openT(t, dir, opts)
	spans := make([]frameSpan, n)
	for i := range n {
		c := chatEpisode(fmt.Sprintf("ep-%02d", i), 1, 100)[0]
		writeT(t, s, c)
		at := s.idx.eps[c.EpisodeID].calls[0].at
		var hdr [frameHeader]byte
		if _, err := s.files[int(at.seg)].ReadAt(hdr[:], at.off); err != nil {
			t.Fatal(err)
		}
		end := at.off + frameHeader + int64(binary.LittleEndian.Uint32(hdr[:4]))
		spans[i] = frameSpan{seg: int(at.seg), off: at.off, end: end, call: c}
	}
	s.Close()
	return spans
}

func flipByte(t testing.TB, dir string, seg int, off int64, x byte) {
	t.Helper()
	p := segPath(dir, seg)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= x
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

type callReader interface {
	Calls(ctx context.Context, ep string) ([]*recorder.Call, error)
}

// assertReadable checks that the calls of spans read back, and that the
// episode of a damaged one is gone.
func assertReadable(t testing.TB, s callReader, spans []frameSpan, damaged map[int]bool) {
	t.Helper()
	for i, sp := range spans {
		got, err := s.Calls(context.Background(), sp.call.EpisodeID)
		if damaged[i] {
			if !errors.Is(err, recorder.ErrNotFound) {
				t.Fatalf("damaged %s: got %d calls, err %v; want not found", sp.call.EpisodeID, len(got), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Calls(%s): %v", sp.call.EpisodeID, err)
		}
		assertCalls(t, got, []*recorder.Call{sp.call})
	}
}

// TestDamagedFrameSkipped: a frame that fails its checksum in the middle
// of a segment loses only itself: the frames after it are read, counted
// damage is its size, and a writer neither cuts the segment there nor
// loses what it appends next.
func TestDamagedFrameSkipped(t *testing.T) {
	dir := t.TempDir()
	spans := writeSingles(t, dir, 4, Options{})
	size := segBytes(t, dir)
	flipByte(t, dir, 1, spans[1].off+frameHeader+10, 0x55)
	want := Damage{Regions: 1, Bytes: spans[1].end - spans[1].off}
	damaged := map[int]bool{1: true}

	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	assertReadable(t, r, spans, damaged)
	if d, _ := r.Damaged(); d != want {
		t.Fatalf("reader damage = %+v, want %+v", d, want)
	}
	r.Close()

	s := openT(t, dir, Options{})
	if got := segBytes(t, dir); got != size {
		t.Fatalf("after reopen the log is %d bytes, want %d (nothing cut)", got, size)
	}
	if d, _ := s.Damaged(); d != want {
		t.Fatalf("writer damage = %+v, want %+v", d, want)
	}
	more := chatEpisode("ep-more", 1, 100)
	writeT(t, s, more...)
	s.Close()
	s = openT(t, dir, Options{})
	assertReadable(t, s, spans, damaged)
	assertCalls(t, callsT(t, s, "ep-more"), more)
}

// TestDamagedFrameThenTornTail: after a damaged frame, a torn frame at the
// end of the newest segment is still cut off at its own start.
func TestDamagedFrameThenTornTail(t *testing.T) {
	dir := t.TempDir()
	spans := writeSingles(t, dir, 3, Options{})
	good := segBytes(t, dir)
	flipByte(t, dir, 1, spans[0].off+2, 0x01) // the first frame's length
	f, err := os.OpenFile(segPath(dir, 1), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(appendFrame(nil, []byte("cxyz"))[:9])
	f.Close()

	s := openT(t, dir, Options{})
	if got := segBytes(t, dir); got != good {
		t.Fatalf("after reopen the log is %d bytes, want %d (torn tail cut)", got, good)
	}
	want := Damage{Regions: 1, Bytes: spans[0].end - spans[0].off}
	if d, _ := s.Damaged(); d != want {
		t.Fatalf("damage = %+v, want %+v", d, want)
	}
	assertReadable(t, s, spans, map[int]bool{0: true})
}

// FuzzSegmentRead writes calls across several segments, flips bytes at
// fuzzer-chosen offsets (3 bytes each: a 16-bit offset into the
// concatenated segments, an XOR mask) and reopens: nothing panics, and
// every call whose frame bytes were untouched reads back, from a reader and
// from a writer, which still appends.
func FuzzSegmentRead(f *testing.F) {
	tmpl := f.TempDir()
	spans := writeSingles(f, tmpl, 8, Options{NoSync: true, SegmentBytes: 2500})
	segs, err := listSegments(tmpl)
	if err != nil || len(segs) < 2 {
		f.Fatalf("segments %v: %v", segs, err)
	}
	var logBytes [][]byte
	total := 0
	for _, n := range segs {
		b, err := os.ReadFile(segPath(tmpl, n))
		if err != nil {
			f.Fatal(err)
		}
		logBytes, total = append(logBytes, b), total+len(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 2, 0xff})
	f.Add([]byte{0, 30, 0x10, 1, 0, 0x01, 5, 0, 0x80})
	f.Fuzz(func(t *testing.T, flips []byte) {
		dir := t.TempDir()
		files := make([][]byte, len(logBytes))
		for i, b := range logBytes {
			files[i] = append([]byte(nil), b...)
		}
		damaged := map[int]bool{}
		for ; len(flips) >= 3; flips = flips[3:] {
			off := int(binary.BigEndian.Uint16(flips)) % total
			x := flips[2] | 1
			i := 0
			for off >= len(files[i]) {
				off -= len(files[i])
				i++
			}
			files[i][off] ^= x
			for k, sp := range spans {
				if sp.seg == segs[i] && int64(off) >= sp.off && int64(off) < sp.end {
					damaged[k] = true
				}
			}
		}
		for i, n := range segs {
			if err := os.WriteFile(segPath(dir, n), files[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		checkFuzzed(t, dir, spans, damaged)
	})
}

func checkFuzzed(t *testing.T, dir string, spans []frameSpan, damaged map[int]bool) {
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	assertUntouched(t, r, spans, damaged)
	r.Close()
	s := openT(t, dir, Options{NoSync: true, SegmentBytes: 2500})
	assertUntouched(t, s, spans, damaged)
	more := chatEpisode("ep-more", 1, 100)
	writeT(t, s, more...)
	s.Close()
	s = openT(t, filepath.Clean(dir), Options{NoSync: true})
	assertUntouched(t, s, spans, damaged)
	assertCalls(t, callsT(t, s, "ep-more"), more)
}

// assertUntouched is assertReadable that lets a damaged call's episode be
// missing or hold what survived of it.
func assertUntouched(t *testing.T, s *Store, spans []frameSpan, damaged map[int]bool) {
	t.Helper()
	var ok []frameSpan
	for i, sp := range spans {
		if !damaged[i] {
			ok = append(ok, sp)
		} else {
			s.CallsChecked(context.Background(), sp.call.EpisodeID)
		}
	}
	assertReadable(t, s, ok, nil)
}
