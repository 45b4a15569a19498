package cmd

import (
	"os"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/exitcode"
	"github.com/gpuguard/gpuguard/internal/offcall"
	"github.com/gpuguard/gpuguard/policy"
)

// openNotice is how often `run` says that it is still opening the backend.
const openNotice = 10 * time.Second

// awaitOpen waits for open, a backend's opening, which runs off the
// command's goroutine. nvmlInit can take seconds on a large host without
// persistence mode, and for ever in a hung driver, as can a DRM counter's
// read; no such call can be interrupted. Giving up would turn a slow host
// into a failed start, so run keeps waiting, but says so every openNotice,
// and a SIGTERM, SIGINT or SIGHUP ends the wait with 128+signal, as any
// stop while no child runs does (the deferred clean-up then runs: the
// socket goes, the lock is let go). The abandoned call is left to the
// exit. Before, the opening ran on the command's goroutine: a hung driver
// hung `run` silently, and a stop killed it without clean-up.
func awaitOpen(open func() (gpu.Probe, error), signals <-chan os.Signal, logf func(string, ...any)) (gpu.Probe, error) {
	opened := offcall.Go(open)
	tick := time.NewTicker(openNotice)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case r := <-opened:
			return r.V, r.Err
		case <-tick.C:
			logf("still opening the GPU backend after %s (is the driver hung?)", time.Since(start).Round(time.Second))
		case sig := <-signals:
			if s, ok := sig.(syscall.Signal); ok { // only the three stop signals are notified
				logf("stopped by %s while opening the GPU backend", policy.SignalName(s))
				return nil, &ExitError{Code: exitcode.Signaled(int(s))}
			}
		}
	}
}
