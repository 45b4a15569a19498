package open

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/offcall"
	"github.com/gpuguard/gpuguard/policy"
)

// notice is how often Await says that it is still opening the backend.
const notice = 10 * time.Second

// Stopped is Await's error for a stop signal that ended the wait. The
// command exits 128+Signal, as for any stop while no child runs.
type Stopped struct{ Signal syscall.Signal }

func (e *Stopped) Error() string {
	return fmt.Sprintf("stopped by %s while opening the GPU backend", policy.SignalName(e.Signal))
}

// Await waits for open, a backend's opening, which runs off the caller's
// goroutine. nvmlInit can take seconds on a large host without
// persistence mode, and for ever in a hung driver, as can a DRM counter's
// read; no such call can be interrupted. Giving up would turn a slow host
// into a failed start, so run keeps waiting, but says so every notice,
// and a SIGTERM, SIGINT or SIGHUP on signals ends the wait with *Stopped
// (the caller's clean-up then runs: the socket goes, the lock is let go).
// The abandoned call is left to the exit. Before, the opening ran on the
// command's goroutine: a hung driver hung `run` silently, and a stop
// killed it without clean-up.
func Await(open func() (gpu.Probe, error), signals <-chan os.Signal, logf func(string, ...any)) (gpu.Probe, error) {
	opened := offcall.Go(open)
	tick := time.NewTicker(notice)
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
				st := &Stopped{Signal: s}
				logf("%v", st)
				return nil, st
			}
		}
	}
}
