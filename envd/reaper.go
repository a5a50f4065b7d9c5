package envd

import (
	"context"
	"time"
)

// Start sweeps sandboxes left behind by an earlier envd, then reaps
// sandboxes past their TTL or idle timeout until ctx is done, and finally
// deletes every live sandbox (finishing their episodes with status
// "error"). It blocks until then.
func (m *Manager) Start(ctx context.Context) error {
	if n, err := m.opts.Backend.Sweep(ctx, m.known); err != nil {
		m.opts.Logger.Warn("orphan sweep failed", "err", err)
	} else if n > 0 {
		m.opts.Logger.Info("orphan sweep removed sandboxes", "count", n)
	}
	t := time.NewTicker(m.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			m.Reap(ctx, m.opts.Now())
		case <-ctx.Done():
			m.shutdown()
			return nil
		}
	}
}

// known reports whether id is a live sandbox of this manager.
func (m *Manager) known(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.sandboxes[id]
	return ok
}

// Reap deletes the sandboxes that are past their TTL or idle at now,
// finishing their episodes with status "timeout", and returns their ids.
// [Manager.Start] calls it every ReapInterval.
func (m *Manager) Reap(ctx context.Context, now time.Time) []string {
	var ids []string
	var reasons []string
	m.mu.Lock()
	for id, sb := range m.sandboxes {
		if r := sb.expired(now); r != "" {
			ids, reasons = append(ids, id), append(reasons, r)
		}
	}
	m.mu.Unlock()
	for i, id := range ids {
		o := &Outcome{Status: "timeout", Info: map[string]any{"reason": reasons[i]}}
		if _, err := m.Delete(ctx, id, o); err != nil {
			m.opts.Logger.Warn("reap sandbox", "sandbox", id, "err", err)
		} else {
			m.opts.Logger.Info("sandbox reaped", "sandbox", id, "reason", reasons[i])
		}
	}
	return ids
}

// expired returns why the sandbox should be reaped at now: "ttl", "idle",
// or "" to keep it.
func (sb *sandbox) expired(now time.Time) string {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch {
	case !now.Before(sb.info.ExpiresAt):
		return "ttl"
	case sb.active == 0 && now.Sub(sb.lastUsed) >= sb.idle:
		return "idle"
	}
	return ""
}

// shutdown deletes every live sandbox, in parallel, within 30 s.
func (m *Manager) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	sbs := m.List()
	for _, s := range sbs {
		go func() {
			defer func() { done <- struct{}{} }()
			o := &Outcome{Status: "error", Info: map[string]any{"reason": "envd shut down"}}
			if _, err := m.Delete(ctx, s.ID, o); err != nil {
				m.opts.Logger.Warn("delete sandbox at shutdown", "sandbox", s.ID, "err", err)
			}
		}()
	}
	for range sbs {
		<-done
	}
}
