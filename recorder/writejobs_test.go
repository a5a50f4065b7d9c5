package recorder

import (
	"sync/atomic"
	"testing"
)

// TestRunWriteJobs runs every job exactly once, for write sizes around the
// switch from serial to parallel, with one call a job and with several.
func TestRunWriteJobs(t *testing.T) {
	for _, n := range []int{0, 1, 7, 15, 16, 17, 100} {
		for _, calls := range []int{n, 8 * n} {
			counts := make([]atomic.Int32, n)
			RunWriteJobs(n, calls, func(i int) { counts[i].Add(1) })
			for i := range counts {
				if c := counts[i].Load(); c != 1 {
					t.Fatalf("n=%d calls=%d: job %d ran %d times", n, calls, i, c)
				}
			}
		}
	}
}
