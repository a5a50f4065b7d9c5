package loadgen

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProfileSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, 200 * time.Millisecond: 1, 4 * time.Second: 4,
		4400 * time.Millisecond: 4, 4500 * time.Millisecond: 5, 20 * time.Second: 20} {
		if got := profileSeconds(d); got != want {
			t.Errorf("profileSeconds(%v) = %d, want %d", d, got, want)
		}
	}
	if got := profileName(target{Key: "b+ids'"}.slug(), cellKey{mode: "closed", conc: 64}, 2); got != "b_ids_base-closed64-r2.pprof" {
		t.Errorf("profileName = %q", got)
	}
}

// TestCPUProfileOfWindow takes a one-second profile from a real pprof
// handler over a window and finds it written, with the window's marks
// passed on in order.
func TestCPUProfileOfWindow(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	var marks []bool
	cr := &cellRun{}
	mark := profiling(context.Background(), dir, srv.Listener.Addr().String(), "f-closed64-r1.pprof", 1, cr,
		func(end bool) { marks = append(marks, end) })
	mark(false)
	mark(true) // waits for the profile
	if !slices.Equal(marks, []bool{false, true}) || len(cr.notes) != 0 {
		t.Fatalf("marks %v, notes %q", marks, cr.notes)
	}
	b, err := os.ReadFile(filepath.Join(dir, "f-closed64-r1.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) { // pprof's protobuf, gzipped
		t.Fatalf("not a gzipped profile: % x", b[:min(len(b), 8)])
	}
}

// TestCPUProfileRefused: a profile the proxy refuses is a note on the cell
// and no file.
func TestCPUProfileRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "profiling already in use", http.StatusInternalServerError)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cr := &cellRun{}
	mark := profiling(context.Background(), dir, srv.Listener.Addr().String(), "c-closed8-r1.pprof", 1, cr, func(bool) {})
	mark(false)
	mark(true)
	if len(cr.notes) != 1 || !strings.Contains(cr.notes[0], "500 Internal Server Error: profiling already in use") {
		t.Fatalf("notes %q", cr.notes)
	}
	if _, err := os.Stat(filepath.Join(dir, "c-closed8-r1.pprof")); !os.IsNotExist(err) {
		t.Fatalf("a file for a refused profile: %v", err)
	}
}
