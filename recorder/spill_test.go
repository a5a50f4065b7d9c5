package recorder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSpillCorruptFrameMidFile: one flipped byte in the middle of the spill
// file loses only the frame it hit; replay resynchronises on the next
// frame and delivers the other 199 calls in order.
func TestSpillCorruptFrameMidFile(t *testing.T) {
	down := newFakeStore()
	down.setDown(true)
	opts := testOptions(t)
	p1 := NewPipeline(down, opts)
	stop := startPipeline(t, p1)
	ids := recordN(p1, "x", 200)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(opts.SpillDir, "spill.log")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	starts := frameStarts(t, b)
	if len(starts) != 200 {
		t.Fatalf("%d frames in the spill file, want 200", len(starts))
	}
	b[starts[100]+40] ^= 0x55 // inside frame 100's payload
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	up := newFakeStore()
	p2 := NewPipeline(up, opts)
	stop = startPipeline(t, p2)
	up.waitFor(t, "199 calls", hasAll(199))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertDelivered(t, up, slices.Delete(ids, 100, 101))
}

// frameStarts returns the offsets of the frames of a valid spill file.
func frameStarts(t *testing.T, b []byte) []int {
	t.Helper()
	var out []int
	r := readerAt(b)
	for off := int64(0); off < int64(len(b)); {
		_, n, ok := spillFrameAt(r, off, int64(len(b)))
		if !ok {
			t.Fatalf("no frame at %d", off)
		}
		out = append(out, int(off))
		off += n
	}
	return out
}

type readerAt []byte

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r)) {
		return 0, errors.New("eof")
	}
	n := copy(p, r[off:])
	if n < len(p) {
		return n, errors.New("eof")
	}
	return n, nil
}

// TestSpillDirLocked: a second pipeline on a spill directory in use fails
// to open with ErrSpillLocked, and opens once the first has stopped.
func TestSpillDirLocked(t *testing.T) {
	opts := testOptions(t)
	p1 := NewPipeline(newFakeStore(), opts)
	if err := p1.Open(); err != nil {
		t.Fatal(err)
	}
	stop := startPipeline(t, p1)
	p2 := NewPipeline(newFakeStore(), opts)
	if err := p2.Open(); !errors.Is(err, ErrSpillLocked) {
		t.Fatalf("second Open = %v, want ErrSpillLocked", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := p2.Open(); err != nil {
		t.Fatalf("Open after the first stopped: %v", err)
	}
	p2.spill.close()
}

// FuzzSpillRead: a spill file of 20 calls with bytes overwritten at any
// offset never panics the reader, and every frame the damage did not touch
// is read back.
func FuzzSpillRead(f *testing.F) {
	f.Add(uint16(0), []byte{0xff})
	f.Add(uint16(300), []byte("\xa7sp\xf1\x00\x00\x00\x40"))
	f.Add(uint16(1000), make([]byte, 64))
	f.Fuzz(func(t *testing.T, at uint16, junk []byte) {
		var file []byte
		var starts []int
		for i := range 20 {
			b, err := MarshalCall(testCall("ep", fmt.Sprintf("c-%02d", i), i))
			if err != nil {
				t.Fatal(err)
			}
			starts = append(starts, len(file))
			file = appendSpillFrame(file, b)
		}
		starts = append(starts, len(file))
		lo := int(at) % len(file)
		hi := min(len(file), lo+len(junk))
		copy(file[lo:hi], junk)
		path := filepath.Join(t.TempDir(), "spill.log")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		_, calls, _ := readSpill(fh, 0, int64(len(file)), 1000)
		got := map[string]bool{}
		for _, c := range calls {
			got[c.CallID] = true
		}
		for i := range 20 {
			untouched := hi <= starts[i] || lo >= starts[i+1] || lo == hi
			if untouched && !got[fmt.Sprintf("c-%02d", i)] {
				t.Fatalf("frame %d [%d,%d) untouched by damage [%d,%d) but not read", i, starts[i], starts[i+1], lo, hi)
			}
		}
	})
}
