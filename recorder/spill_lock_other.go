//go:build !unix

package recorder

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockSpillDir opens dir/spill.lock. Without flock on this platform it
// does not exclude another process: give each proxy its own spill dir.
func lockSpillDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "spill.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open spill lock: %w", err)
	}
	return f, nil
}
