package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// countRecords checks that the stopped proxy recorded every request it
// was sent, by listing the run's episodes with `orchard episodes list`.
// Calls the pipeline spilled to its file (store slow or down) reach the
// store only when a proxy starts on it again; if some are missing, it
// restarts the proxy once to replay them and counts again.
func (s *suite) countRecords(ctx context.Context, cr *cellRun, t target, key cellKey, e targetEnv, run string, m *Measurement) {
	sent := 0
	for o, n := range m.Outcomes {
		if o := Outcome(o); o != Dropped && o != Lifecycle {
			sent += n
		}
	}
	cr.sent += sent
	got, err := countCalls(ctx, s.bin(t), t.store(e), run)
	if err == nil && got < sent {
		var after int
		if after, err = s.replaySpill(ctx, t, key, e, run, sent); err == nil {
			cr.spilled += after - got
			got = after
		}
	}
	if err != nil {
		cr.notes = append(cr.notes, "count records: "+err.Error())
		cr.recorded = -1
		return
	}
	if cr.recorded >= 0 {
		cr.recorded += got
	}
}

// replaySpill starts t's proxy again on the same store and spill directory,
// waits (at most 30s) until the store holds want calls of run, stops it and
// returns the count.
func (s *suite) replaySpill(ctx context.Context, t target, key cellKey, e targetEnv, run string, want int) (int, error) {
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	e.listen = addr
	px, err := startProc(ctx, t.Name+"-replay", append([]string{s.bin(t)}, t.args(e)...), s.procEnv(t, key), addr, s.work, httpReady)
	if err != nil {
		return 0, err
	}
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && got < want && sleep(ctx, 500*time.Millisecond) {
		if got, err = countCalls(ctx, s.bin(t), t.store(e), run); err != nil {
			break
		}
	}
	if serr := px.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, err
	}
	return countCalls(ctx, s.bin(t), t.store(e), run)
}

// countCalls sums the calls of the episodes whose id starts with prefix.
func countCalls(ctx context.Context, bin string, store []string, prefix string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append([]string{"episodes", "list", "--json"}, store...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("orchard episodes list: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	n := 0
	for line := range bytes.SplitSeq(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ep struct {
			ID    string `json:"id"`
			Calls int    `json:"calls"`
		}
		if err := json.Unmarshal(line, &ep); err != nil {
			return 0, fmt.Errorf("orchard episodes list: %w", err)
		}
		if strings.HasPrefix(ep.ID, prefix+"-") {
			n += ep.Calls
		}
	}
	return n, nil
}
