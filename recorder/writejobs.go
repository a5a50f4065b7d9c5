package recorder

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// RunWriteJobs runs job(0) ... job(n-1), the independent parts of one
// store write (encoding one episode's calls, compressing one call), on up
// to GOMAXPROCS goroutines, and returns when all are done. A single job
// runs on the caller's goroutine. The store writer is one goroutine: run
// serially, its writes fell behind the calls arriving once the CPU was
// saturated, and the record queue held them in memory.
func RunWriteJobs(n int, job func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			job(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				job(i)
			}
		})
	}
	wg.Wait()
}
