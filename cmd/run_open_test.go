package cmd

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/gpuguard/gpuguard/gpu"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
)

// TestStoppedOpenExits: a stop while the backend opens
// (probeopen.Await's *Stopped) is a silent exit 128+signal; the backend's
// other errors keep their codes.
func TestStoppedOpenExits(t *testing.T) {
	err := openExit(&probeopen.Stopped{Signal: syscall.SIGTERM})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 143 || ee.Err != nil {
		t.Errorf("after SIGTERM: %v; want a silent exit 143", err)
	}
	if got := exitCode(openExit(fmt.Errorf("%w: no NVML", gpu.ErrUnavailable))); got != ExitUnavailable {
		t.Errorf("an unavailable backend exits %d, want %d", got, ExitUnavailable)
	}
	if got := exitCode(openExit(errors.New("--devices with the sim backend: bad"))); got != ExitUsage {
		t.Errorf("a bad selection exits %d, want %d", got, ExitUsage)
	}
}
