//go:build unix

package recorder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockSpillDir takes an exclusive flock on dir/spill.lock, held until the
// returned file is closed (or the process dies, so a crash never leaves
// it locked).
func lockSpillDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, "spill.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open spill lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("spill directory %s: %w (give each proxy its own --spill-dir)", dir, ErrSpillLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return f, nil
}
