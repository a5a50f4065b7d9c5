//go:build !linux

package agent

import (
	"errors"
	"log/slog"
)

// RunInit is Linux-only: sandboxes run on Linux.
func RunInit(Config, *slog.Logger) (int, error) {
	return 1, errors.New("the agent's init mode needs Linux")
}
