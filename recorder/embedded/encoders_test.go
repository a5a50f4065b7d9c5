package embedded

import (
	"context"
	"fmt"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// TestEncoderBound: with more episodes written than MaxEncoders, dedup
// state stays bounded and an evicted episode written again still decodes
// exactly.
func TestEncoderBound(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true, MaxEncoders: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	episodes := map[string][]*recorder.Call{}
	for e := range 5 {
		ep := fmt.Sprintf("ep-%d", e)
		episodes[ep] = storetest.ChatEpisode(ep, 4, 2000)
	}
	for turn := range 4 {
		for e := range 5 {
			c := episodes[fmt.Sprintf("ep-%d", e)][turn]
			if err := s.WriteCalls(ctx, []*recorder.Call{c}); err != nil {
				t.Fatal(err)
			}
			if n := len(s.encoders); n > 3 {
				t.Fatalf("%d encoders kept, bound is 3", n)
			}
		}
	}
	for ep, want := range episodes {
		got, err := s.Calls(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		storetest.AssertCalls(t, got, want)
	}
}
