//go:build unix

package serve

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used so far:
// on a machine loaded by others the wall-clock rates of the throughput
// benchmark move with the neighbours, but the CPU each request costs does
// not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
