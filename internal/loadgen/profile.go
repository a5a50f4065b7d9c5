package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// An orchard proxy under load is profiled over each measured window when
// Config.CPUProfiles names a directory: the proxy runs with --pprof on a
// free loopback port, and when the window starts the suite asks that port
// for a CPU profile as long as the window (the pprof handler's "seconds",
// whole seconds), then writes it as <target>-<mode><clients>-r<round>.pprof.
// A profile that cannot be had is a note on the cell, not a failed run.

// maxProfile bounds the bytes read of one profile: a CPU profile of a few
// seconds is tens of kilobytes.
const maxProfile = 64 << 20

// profileSeconds is the length of a profile of a window of d: whole
// seconds, at least one.
func profileSeconds(d time.Duration) int {
	return max(1, int((d+time.Second/2)/time.Second))
}

// profileName is the file of target slug's profile in a round of a cell.
func profileName(slug string, key cellKey, round int) string {
	return fmt.Sprintf("%s-%s%d-r%d.pprof", slug, key.mode, key.conc, round)
}

// fetchCPUProfile asks the pprof server at addr (host:port) for a CPU
// profile of the next seconds seconds and returns it.
func fetchCPUProfile(ctx context.Context, addr string, seconds int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProfile+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("cpu profile: %w", err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("cpu profile: %s: %.200s", resp.Status, body)
	case len(body) > maxProfile:
		return nil, fmt.Errorf("cpu profile: larger than %d bytes", maxProfile)
	}
	return body, nil
}

// profiling wraps a cell's window marker so that a CPU profile of the
// proxy at addr is taken over each window and written under dir.
func profiling(ctx context.Context, dir, addr, name string, seconds int, cr *cellRun, mark func(end bool)) func(end bool) {
	var done chan struct{}
	var prof []byte
	var err error
	return func(end bool) {
		if !end {
			done = make(chan struct{})
			go func() {
				defer close(done)
				prof, err = fetchCPUProfile(ctx, addr, seconds)
			}()
			mark(false)
			return
		}
		mark(true)
		if done == nil {
			return
		}
		<-done
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), prof, 0o644)
		}
		if err != nil {
			cr.notes = append(cr.notes, err.Error())
		}
	}
}
