package recorder

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// RunWriteJobs runs job(0) ... job(n-1), the independent parts of one
// store write of calls calls (encoding one episode's calls, compressing
// one call), and returns when all are done. The store writer is one
// goroutine: run serially, its writes fell behind the calls arriving once
// the CPU was saturated, and the record queue held them in memory. So a
// write of many calls runs its jobs on up to GOMAXPROCS goroutines, one
// for each callsPerWorker calls, while the caller waits; a smaller write
// runs them on the caller's goroutine.
func RunWriteJobs(n, calls int, job func(i int)) {
	workers := min(n, calls/callsPerWorker, runtime.GOMAXPROCS(0))
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

// callsPerWorker is the fewest calls that pay for a goroutine. Waking one
// costs about as much as compressing a call (15-30 us): spread over two
// goroutines, writes of 5 and 12 calls took 30-50% and 14-18% more CPU a
// call than on one, and no less time, while 32 calls took the same CPU
// and a quarter less time (BenchmarkWriteBatchSizes). A proxy with one
// busy client writes about five calls at a time.
const callsPerWorker = 8
