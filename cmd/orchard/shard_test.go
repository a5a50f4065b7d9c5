package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/orchard-rl/orchard/recorder/embedded"
	"github.com/orchard-rl/orchard/recorder/storetest"
)

// seedEpisodes stores n two-turn chat episodes, one minute apart.
func seedEpisodes(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	st, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		calls := storetest.ChatEpisode(fmt.Sprintf("ep-%03d", i), 2, 60)
		for _, c := range calls {
			c.StartedAt = c.StartedAt.Add(time.Duration(i) * time.Minute)
		}
		storetest.Write(t, st, calls...)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportShards: shards 0/3..2/3 of 100 episodes are disjoint, their
// union is the unsharded export line for line (sorted by episode), and
// merge gives the unsharded export byte for byte.
func TestExportShards(t *testing.T) {
	data, out := seedEpisodes(t, 100), t.TempDir()
	full := filepath.Join(out, "full.jsonl")
	if msg, err := runCLI(t, "export", "--data", data, "--format", "turns", "--out", full); err != nil {
		t.Fatalf("export: %v\n%s", err, msg)
	}
	var shards []string
	owner := map[string]int{}
	var union []string
	for i := range 3 {
		f := filepath.Join(out, fmt.Sprintf("shard-%d.jsonl", i))
		if msg, err := runCLI(t, "export", "--data", data, "--format", "turns", "--shard", fmt.Sprintf("%d/3", i), "--out", f); err != nil {
			t.Fatalf("export --shard %d/3: %v\n%s", i, err, msg)
		}
		shards = append(shards, f)
		lines := readLines(t, f)
		eps := map[string]bool{}
		for _, l := range lines {
			ep := gjson.Get(l, "episode_id").String()
			if o, ok := owner[ep]; ok && o != i {
				t.Errorf("episode %s in shards %d and %d", ep, o, i)
			}
			owner[ep], eps[ep] = i, true
		}
		if len(eps) == 0 {
			t.Errorf("shard %d/3 is empty", i)
		}
		union = append(union, lines...)
	}
	want := readLines(t, full)
	if len(owner) != 100 || len(want) != 200 {
		t.Fatalf("shards hold %d episodes, full export %d lines; want 100 and 200", len(owner), len(want))
	}
	byEpisode := func(a, b string) int {
		return strings.Compare(gjson.Get(a, "episode_id").String(), gjson.Get(b, "episode_id").String())
	}
	slices.SortStableFunc(union, byEpisode)
	slices.SortStableFunc(want, byEpisode)
	if !slices.Equal(union, want) {
		t.Fatalf("union of the shards (%d lines) differs from the unsharded export (%d lines)", len(union), len(want))
	}

	merged := filepath.Join(out, "merged.jsonl")
	if msg, err := runCLI(t, append([]string{"export", "merge", "--out", merged}, shards[2], shards[0], shards[1])...); err != nil {
		t.Fatalf("merge: %v\n%s", err, msg)
	}
	if a, b := readFile(t, merged), readFile(t, full); !bytes.Equal(a, b) {
		t.Fatalf("merged export (%d bytes) differs from the unsharded one (%d bytes)", len(a), len(b))
	}
}

func TestExportShardErrors(t *testing.T) {
	data, out := seedEpisodes(t, 5), t.TempDir()
	for _, s := range []string{"3/3", "-1/2", "1", "a/b", "0/0"} {
		if _, err := runCLI(t, "export", "--data", data, "--shard", s, "--out", filepath.Join(out, "x.jsonl")); err == nil ||
			!strings.Contains(err.Error(), "want I/N") {
			t.Errorf("--shard %s: err %v, want a usage error", s, err)
		}
	}
	s0, s1 := filepath.Join(out, "s0.jsonl"), filepath.Join(out, "s1.jsonl")
	for i, f := range []string{s0, s1} {
		if msg, err := runCLI(t, "export", "--data", data, "--shard", fmt.Sprintf("%d/2", i), "--out", f); err != nil {
			t.Fatalf("export: %v\n%s", err, msg)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing shard", []string{s0}, "shard 1/2 missing"},
		{"twice", []string{s0, s0}, "given twice"},
		{"no manifest", []string{filepath.Join(out, "none.jsonl")}, "read shard manifest"},
	} {
		if _, err := runCLI(t, append([]string{"export", "merge"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("merge %s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	s := strings.TrimSuffix(string(readFile(t, path)), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
