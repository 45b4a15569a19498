package cmd

import (
	"errors"

	"github.com/gpuguard/gpuguard/gpu"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
	"github.com/gpuguard/gpuguard/internal/exitcode"
)

// simHint is the line after a backend's absence (69): what to do without
// a GPU.
const simHint = "use --backend sim to run on a simulated GPU"

// openExit is the exit for a backend that did not open: a stop while it
// opened (probeopen.Await) exits 128+signal silently, as any stop while
// no child runs does; a backend that cannot run here 69, in a line for each
// backend looked for (what was not found) and simHint; anything else (an
// unknown backend, a bad device selection) is a usage error.
func openExit(err error) error {
	var st *probeopen.Stopped
	switch {
	case errors.As(err, &st):
		return &ExitError{Code: exitcode.Signaled(int(st.Signal))}
	case errors.Is(err, gpu.ErrUnavailable):
		lines := probeopen.NotFound(err)
		return &ExitError{Code: ExitUnavailable, Err: errors.New(lines[0]), More: append(lines[1:], simHint)}
	}
	return withCode(ExitUsage, err)
}
