package rollout

import (
	"bytes"
	"context"
	"io"
	"sort"
	"sync/atomic"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	d := Defaults()
	if d.Output != io.Discard || d.Workdir != "/work" || d.Network != "proxy" || d.Timeout != 30*time.Minute ||
		d.VerifierTimeout != 10*time.Minute || d.N != 8 || d.Concurrency != 64 ||
		d.Image != "" || d.Verifier != "" || d.NoEpisode || d.Envd != nil || d.Harness != nil || d.Env != nil {
		t.Errorf("Defaults() = %+v", d)
	}
}

func TestNewFillsZeroFields(t *testing.T) {
	got := New(Options{Harness: []string{"h"}}).o
	if got.Output != io.Discard || got.Workdir != "/work" || got.Network != "proxy" || got.N != 8 || got.Concurrency != 64 {
		t.Errorf("New(zero).o = %+v", got)
	}
	if got.Timeout != 0 || got.VerifierTimeout != 0 {
		t.Errorf("zero timeouts (no limit) changed: %v %v", got.Timeout, got.VerifierTimeout)
	}
}

func TestNewKeepsSetFields(t *testing.T) {
	var out bytes.Buffer
	o := Options{Output: &out, Workdir: "/w", Network: "none", Timeout: time.Second, VerifierTimeout: 2 * time.Second,
		N: 3, Concurrency: 2, Image: "img", Verifier: "true", NoEpisode: true}
	got := New(o).o
	if got.Output != &out || got.Workdir != "/w" || got.Network != "none" || got.Timeout != time.Second ||
		got.VerifierTimeout != 2*time.Second || got.N != 3 || got.Concurrency != 2 || got.Image != "img" ||
		got.Verifier != "true" || !got.NoEpisode {
		t.Errorf("New(o).o = %+v, want %+v", got, o)
	}
}

func TestSpec(t *testing.T) {
	r := New(Options{Harness: []string{"codex", "exec"}, Env: map[string]string{"A": "1", "B": "runner"},
		Timeout: time.Minute, VerifierTimeout: time.Minute})
	tk := Task{ID: "t1", Prompt: "fix it", Env: map[string]string{"B": "task"}, Metadata: map[string]any{"k": "v"}}
	s := r.spec(tk, "g1", 3)
	if s.Workdir != "/work" || s.Network != "proxy" || time.Duration(s.TTL) != 7*time.Minute ||
		s.Env["ORCHARD_TASK_ID"] != "t1" || s.Env["ORCHARD_TASK_PROMPT"] != "fix it" || s.Env["A"] != "1" || s.Env["B"] != "task" {
		t.Errorf("spec = %+v", s)
	}
	if e := s.Episode; e == nil || e.TaskID != "t1" || e.GroupID != "g1" || e.Metadata["harness"] != "codex" ||
		e.Metadata["sample"] != 3 || e.Metadata["k"] != "v" {
		t.Errorf("episode = %+v", s.Episode)
	}
	r.o.NoEpisode = true
	if s := r.spec(tk, "g1", 3); s.Episode != nil {
		t.Errorf("no-episode spec has an episode: %+v", s.Episode)
	}
}

func TestArgv(t *testing.T) {
	r := New(Options{Harness: []string{"agent", "--task={task_id}", "{prompt} now"}})
	got := r.argv(Task{ID: "t9", Prompt: "p"})
	if len(got) != 3 || got[0] != "agent" || got[1] != "--task=t9" || got[2] != "p now" {
		t.Errorf("argv = %q", got)
	}
}

func TestGroupRunsEverySampleWithinTheLimit(t *testing.T) {
	var running, peak atomic.Int32
	one := func(_ context.Context, tk Task, s int) Result {
		if n := running.Add(1); n > peak.Load() {
			peak.Store(n)
		}
		defer running.Add(-1)
		return Result{TaskID: tk.ID, GroupID: tk.ID, Sample: s}
	}
	var seen []string
	res := group(context.Background(), []Task{{ID: "a"}, {ID: "b"}}, 3, 2, one, func(r Result) {
		seen = append(seen, r.TaskID+string(rune('0'+r.Sample)))
	})
	sort.Strings(seen)
	if len(res) != 6 || len(seen) != 6 || seen[0] != "a0" || seen[2] != "a2" || seen[3] != "b0" || seen[5] != "b2" {
		t.Errorf("results %v, seen %v", res, seen)
	}
	if peak.Load() > 2 {
		t.Errorf("%d ran at once, limit 2", peak.Load())
	}
}

func TestGroupStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := group(ctx, []Task{{ID: "a"}}, 4, 1, func(context.Context, Task, int) Result {
		t.Error("ran a sample after cancel")
		return Result{}
	}, nil)
	if len(res) != 0 {
		t.Errorf("results %v", res)
	}
}
