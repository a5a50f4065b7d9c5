package recorder_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/orchard-rl/orchard/recorder"
)

func TestCheckEpisodeID(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{"plain", "ep_1:a.b-c", true},
		{"max length", strings.Repeat("a", 128), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", 129), false},
		{"dots only", "..", false},
		{"slash", "a/b", false},
		{"space", "a b", false},
		{"reserved", recorder.Unattributed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := recorder.CheckEpisodeID(tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckEpisodeID(%q) = %v, want ok %v", tc.id, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, recorder.ErrEpisodeID) || !strings.HasPrefix(err.Error(), "episode id ")) {
				t.Errorf("CheckEpisodeID(%q) = %q, want an ErrEpisodeID naming the id", tc.id, err)
			}
		})
	}
}
