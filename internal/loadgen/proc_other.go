//go:build !linux

package loadgen

import "errors"

func readProc(pid int) (ProcStat, error) {
	return ProcStat{}, errors.New("process stats need Linux /proc")
}

func loadAvg() float64 { return -1 }
