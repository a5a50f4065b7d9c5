package kube

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchard-rl/orchard/envd"
)

// failingDeletes is a client whose pod deletes fail while fail is set.
type failingDeletes struct {
	Pods
	fail *atomic.Bool
}

func (p failingDeletes) Delete(ctx context.Context, ns, name string) error {
	if p.fail.Load() {
		return errors.New("injected delete failure")
	}
	return p.Pods.Delete(ctx, ns, name)
}

// TestKubeLifecycle: New starts nothing, so Create and Sweep fail until
// Start; Start works once; Close returns the warm pods it failed to
// delete instead of only logging them.
func TestKubeLifecycle(t *testing.T) {
	cs := needStack(t)
	ns := newNamespace(t, cs)
	port, _ := strconv.Atoi(freePort())
	startKubelet(t, cs, ns, port)
	var fail atomic.Bool
	changed := make(chan struct{}, 16)
	spec := envd.Spec{Image: "busybox:1.36", Workdir: "/work"}
	b, err := New(Options{Pods: failingDeletes{podsAs(t, ""), &fail}, Namespace: ns, AgentImage: "ghcr.io/orchard-rl/orchard:test",
		AgentPort: port, ReadyTimeout: time.Minute, WarmSize: 1, Warm: []envd.Spec{spec}, OnPoolChange: func() { changed <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(t.Context(), "sb-early", &spec); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("Create before Start: %v, want an error saying the backend is not started", err)
	}
	if _, err := b.Sweep(t.Context(), func(string) bool { return true }); err == nil {
		t.Error("Sweep before Start: no error")
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err == nil {
		t.Error("second Start: no error")
	}
	<-changed // one warm pod is ready
	fail.Store(true)
	err = b.Close()
	if err == nil || !strings.Contains(err.Error(), "injected delete failure") || !strings.Contains(err.Error(), "orchard-warm-") {
		t.Fatalf("Close with failing deletes: %v, want the warm pod's failed delete", err)
	}
	if _, err := b.Create(t.Context(), "sb-late", &spec); err == nil {
		t.Error("Create after Close: no error")
	}
}
