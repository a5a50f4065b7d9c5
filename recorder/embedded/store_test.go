package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

func TestRoundTripFixtures(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	want := storetest.Fixtures(t)
	if len(want) != 4 {
		t.Fatalf("%d fixture episodes, want 4", len(want))
	}
	for _, calls := range want {
		for _, c := range calls {
			writeT(t, s, c) // one call per batch, as a live proxy would
		}
	}
	for ep, w := range want {
		assertCalls(t, callsT(t, s, ep), w)
	}
	s.Close()
	s = openT(t, dir, Options{}) // and again from disk
	for ep, w := range want {
		assertCalls(t, callsT(t, s, ep), w)
	}
}

// TestStorageSize is the storage target: a 200-turn episode whose
// request grows to ~100 KB stores less than 1.5x its final request, measured
// on the segment files.
func TestStorageSize(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{NoSync: true})
	calls := chatEpisode("ep-long", 200, 500)
	for _, c := range calls {
		writeT(t, s, c)
	}
	final := len(calls[len(calls)-1].Request)
	if final < 95_000 {
		t.Fatalf("final request is %d bytes, want ~100 KB", final)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	disk := segBytes(t, dir)
	t.Logf("200 turns, final request %d B, stored %d B (%.2fx)", final, disk, float64(disk)/float64(final))
	if disk >= int64(final)*3/2 {
		t.Fatalf("stored %d bytes, want < %d (1.5x the final request)", disk, final*3/2)
	}
	assertCalls(t, callsT(t, openT(t, dir, Options{}), "ep-long"), calls)
}

func TestIdempotent(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	calls := chatEpisode("ep", 5, 200)
	writeT(t, s, calls[0], calls[1], calls[0]) // duplicate inside a batch
	size := segBytes(t, dir)
	writeT(t, s, calls[1], calls[0]) // a replay stores nothing
	if got := segBytes(t, dir); got != size {
		t.Fatalf("replay grew the log from %d to %d bytes", size, got)
	}
	writeT(t, s, calls...)
	s.Close()
	s = openT(t, dir, Options{})
	writeT(t, s, calls[3], calls[4]) // still known after reopen
	assertCalls(t, callsT(t, s, "ep"), calls)
	if sum, err := s.Episode(context.Background(), "ep"); err != nil || sum.Calls != 5 {
		t.Fatalf("Episode = %+v, %v; want 5 calls", sum, err)
	}
}

// TestIdempotentLongEpisode: an episode past idMapMin calls, whose ids
// move from a scan to a map, still stores each call once: replays before
// and after the move, within a batch and after a reopen store nothing.
func TestIdempotentLongEpisode(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	n := idMapMin + 8
	calls := chatEpisode("ep", n, 50)
	for i, c := range calls {
		writeT(t, s, c)
		if i == idMapMin-2 || i == idMapMin || i == n-1 {
			size := segBytes(t, dir)
			writeT(t, s, calls[0], calls[i], calls[i/2], calls[i]) // replays, one twice in the batch
			if got := segBytes(t, dir); got != size {
				t.Fatalf("after %d calls a replay grew the log from %d to %d bytes", i+1, size, got)
			}
		}
	}
	s.Close()
	s = openT(t, dir, Options{})
	size := segBytes(t, dir)
	writeT(t, s, calls...)
	if got := segBytes(t, dir); got != size {
		t.Fatalf("after a reopen a replay grew the log from %d to %d bytes", size, got)
	}
	assertCalls(t, callsT(t, s, "ep"), calls)
	if sum, err := s.Episode(context.Background(), "ep"); err != nil || sum.Calls != n {
		t.Fatalf("Episode = %+v, %v; want %d calls", sum, err, n)
	}
}

func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	calls := chatEpisode("ep", 6, 300)
	writeT(t, s, calls[:3]...)
	s.Close()
	seg := segPath(dir, 1)
	good := segBytes(t, dir)
	for _, tail := range [][]byte{
		{0x40, 0, 0, 0, 1, 2},                        // header cut short
		appendFrame(nil, []byte("cxyz"))[:9],         // payload cut short
		{4, 0, 0, 0, 0, 0, 0, 0, 'c', 'x', 'y', 'z'}, // bad checksum
	} {
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(tail)
		f.Close()
		r, err := OpenReadOnly(dir) // a reader waits at the torn frame
		if err != nil {
			t.Fatal(err)
		}
		assertCalls(t, callsT(t, r, "ep"), calls[:3])
		r.Close()
		s = openT(t, dir, Options{})
		if got := segBytes(t, dir); got != good {
			t.Fatalf("after reopen the log is %d bytes, want %d (torn tail cut)", got, good)
		}
		s.Close()
	}
	s = openT(t, dir, Options{})
	writeT(t, s, calls[3:]...)
	s.Close()
	assertCalls(t, callsT(t, openT(t, dir, Options{}), "ep"), calls)
}

func TestLocking(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open error = %v, want ErrLocked", err)
	}
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("OpenReadOnly beside a writer: %v", err)
	}
	defer r.Close()
	if err := r.WriteCalls(context.Background(), chatEpisode("ep", 1, 10)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only WriteCalls error = %v, want ErrReadOnly", err)
	}
	s.Close()
	s2 := openT(t, dir, Options{}) // the lock is released by Close
	s2.Close()
	if err := s2.PutEpisode(context.Background(), &recorder.Episode{ID: "x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutEpisode after Close error = %v, want ErrClosed", err)
	}
	if _, err := OpenReadOnly(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenReadOnly(missing) error = %v, want fs.ErrNotExist", err)
	}
}

// TestReaderFollowsRotation checks that a reader opened early sees frames
// appended later, across segment rotations.
func TestReaderFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentBytes: 4 << 10, NoSync: true})
	r, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	calls := chatEpisode("ep", 30, 400)
	for i, c := range calls {
		writeT(t, s, c)
		assertCalls(t, callsT(t, r, "ep"), calls[:i+1])
	}
	if segs, _ := listSegments(dir); len(segs) < 3 {
		t.Fatalf("%d segments, want rotation to have made >= 3", len(segs))
	}
}

func TestWriteCallsRejectsMissingID(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	c := chatEpisode("ep", 1, 10)[0]
	c.CallID = ""
	if err := s.WriteCalls(context.Background(), []*recorder.Call{c}); err == nil {
		t.Fatal("WriteCalls accepted a call without call_id")
	}
	c = chatEpisode("", 1, 10)[0]
	writeT(t, s, c)
	if got := callsT(t, s, recorder.Unattributed); len(got) != 1 || got[0].EpisodeID != recorder.Unattributed {
		t.Fatalf("call without episode stored as %+v, want under %q", got, recorder.Unattributed)
	}
	if c.EpisodeID != "" {
		t.Fatal("WriteCalls modified its input")
	}
}

// TestInterleavedWrite writes the calls of many episodes, interleaved, in
// one write (encoded episode by episode side by side) and one call per
// write (encoded inline) into two stores: the logs must be the same bytes,
// so each episode deduplicated against its own calls, in their order.
func TestInterleavedWrite(t *testing.T) {
	var calls []*recorder.Call
	var eps [][]*recorder.Call
	for e := range 24 {
		eps = append(eps, chatEpisode(fmt.Sprintf("ep-%02d", e), 6, 300))
	}
	for turn := range 6 {
		for _, ep := range eps {
			calls = append(calls, ep[turn])
		}
	}
	one, each, whole := t.TempDir(), t.TempDir(), t.TempDir()
	s1, s2 := openT(t, one, Options{NoSync: true}), openT(t, each, Options{NoSync: true})
	s3 := openT(t, whole, Options{NoSync: true, NoDedup: true})
	writeT(t, s1, calls...)
	writeT(t, s3, calls...)
	for _, c := range calls {
		writeT(t, s2, c)
	}
	for _, ep := range eps {
		assertCalls(t, callsT(t, s1, ep[0].EpisodeID), ep)
	}
	s1.Close()
	s2.Close()
	s3.Close()
	a, b := logBytes(t, one), logBytes(t, each)
	if !bytes.Equal(a, b) {
		t.Fatalf("one write stored %d bytes, one call per write %d: the logs differ", len(a), len(b))
	}
	if n := len(logBytes(t, whole)); len(a) >= n*2/3 {
		t.Fatalf("stored %d bytes, %d without dedup: the episodes were not deduplicated", len(a), n)
	}
}

// logBytes is the log's segments, concatenated in name order.
func logBytes(t *testing.T, dir string) []byte {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(m) == 0 {
		t.Fatalf("segments of %s: %v %v", dir, m, err)
	}
	var out []byte
	for _, p := range m {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestWriteEncodeError: a call that cannot be encoded (a NaN logprob has no
// JSON) fails its whole write, whichever episode it is in; the episodes
// encoded beside it are written again afterwards, whole and deduplicated.
func TestWriteEncodeError(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{NoSync: true})
	good := chatEpisode("good", 4, 300)
	writeT(t, s, good[0])
	bad := *chatEpisode("bad", 1, 300)[0]
	bad.Tokens = &recorder.Tokens{CompletionIDs: []int32{7}, Logprobs: []float32{float32(math.NaN())}}
	err := s.WriteCalls(context.Background(), []*recorder.Call{good[1], &bad, good[2]})
	if err == nil || !strings.Contains(err.Error(), bad.CallID) {
		t.Fatalf("WriteCalls = %v, want the error of call %s", err, bad.CallID)
	}
	writeT(t, s, good[1:]...)
	assertCalls(t, callsT(t, s, "good"), good)
	s.Close()
	assertCalls(t, callsT(t, openT(t, dir, Options{}), "good"), good)
}
