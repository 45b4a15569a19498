package cmd

import (
	"errors"

	"github.com/gpuguard/gpuguard/gpu"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
	"github.com/gpuguard/gpuguard/internal/exitcode"
)

// openExit is the exit for a backend that did not open: a stop while it
// opened (probeopen.Await) exits 128+signal silently, as any stop while
// no child runs does; a backend that cannot run here 69; anything else (an
// unknown backend, a bad device selection) is a usage error.
func openExit(err error) error {
	var st *probeopen.Stopped
	switch {
	case errors.As(err, &st):
		return &ExitError{Code: exitcode.Signaled(int(st.Signal))}
	case errors.Is(err, gpu.ErrUnavailable):
		return &ExitError{Code: ExitUnavailable, Err: err}
	}
	return withCode(ExitUsage, err)
}
