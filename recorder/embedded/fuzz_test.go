package embedded

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

// FuzzSegment opens a directory whose only segment holds arbitrary bytes:
// scanning and reading it must fail cleanly, never panic.
func FuzzSegment(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range chatEpisode("ep", 2, 100) {
		writeT(f, s, c)
	}
	s.PutEpisode(context.Background(), &recorder.Episode{ID: "ep"})
	s.AppendEvent(context.Background(), &recorder.Event{EpisodeID: "ep", Type: "t", Data: []byte(`{}`)})
	s.Close()
	seed, err := os.ReadFile(segPath(dir, 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "0000000001.seg"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReadOnly(dir)
		if err != nil {
			return
		}
		defer r.Close()
		ctx := context.Background()
		eps, _, _ := r.ListEpisodes(ctx, recorder.Filter{})
		for _, e := range eps {
			r.Calls(ctx, e.ID)
			r.Events(ctx, e.ID)
		}
	})
}
