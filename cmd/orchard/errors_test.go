package main

import (
	"strings"
	"testing"
)

// TestErrorsSayEachThingOnce: an unknown episode is named once in the
// error, not once by the store and again by the command.
func TestErrorsSayEachThingOnce(t *testing.T) {
	data := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"episodes show", []string{"episodes", "show", "nope", "--data", data}},
		{"rewards explain", []string{"rewards", "explain", "nope", "--data", data}},
		{"export", []string{"export", "--data", data, "--episodes", "nope", "--format", "turns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCLI(t, tc.args...)
			if err == nil {
				t.Fatal("succeeded for an unknown episode")
			}
			if got := err.Error(); strings.Count(got, "nope") != 1 || !strings.Contains(got, "not found") {
				t.Errorf("error = %q, want the episode named once and \"not found\"", got)
			}
		})
	}
}
