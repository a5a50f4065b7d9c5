//go:build !(darwin || linux || openbsd)

package embedded

import (
	"bytes"
	"os"
)

// writeAll writes bufs to f in order, in one write.
func writeAll(f *os.File, bufs [][]byte) error {
	_, err := f.Write(bytes.Join(bufs, nil))
	return err
}
