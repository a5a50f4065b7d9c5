package embedded

import (
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// TestConformance runs the suite every recorder.Store backend passes.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) recorder.Store {
			s, err := Open(t.TempDir(), Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		Reopen: func(t *testing.T, old recorder.Store) recorder.Store {
			dir := old.(*Store).dir
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
