package cmd

import "runtime"

// schedulerForIdle gives `gpuguard run` one scheduler P unless the
// environment sets GOMAXPROCS (which then reaches the child unchanged too).
//
// A supervisor sleeps between samples, and its CPU cost at idle is wake-ups:
// with several Ps, every goroutine that wakes (the sampler, then the loop)
// also wakes a spare thread to look for work, and the runtime re-reads the
// cgroup CPU limit every second to adjust GOMAXPROCS. Neither helps a
// process whose goroutines wait on timers, pipes and sockets: the probe and
// the children's waits run in syscalls, which hand the P on. Setting
// GOMAXPROCS explicitly turns the periodic re-read off as well. Measured
// in docs/performance.md ("Idle"): the idle cost drops to about half of a
// bare 200 ms ticker's.
func schedulerForIdle(getenv func(string) string) {
	if getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
