package cmd

import (
	"errors"
	"fmt"
	"io"
	"strings"
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
	// What Main prints: a line for each backend looked for, then what to
	// do.
	var stderr strings.Builder
	stdio := &IO{In: strings.NewReader(""), Out: io.Discard, ErrOut: &stderr, Getenv: func(string) string { return "" }}
	dir := t.TempDir()
	code := Execute(stdio, []string{"run", "--backend", "auto", "--state-dir", dir + "/s", "--runtime-dir", dir + "/r", "--", "true"})
	if code == ExitOK {
		t.Skip("a GPU is here: auto found it")
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if code != ExitUnavailable || len(lines) != 3 || !strings.HasPrefix(lines[0], "gpuguard: no GPU found: NVML: ") ||
		!strings.HasPrefix(lines[1], "gpuguard: no GPU found: DRM: ") || lines[2] != "gpuguard: "+simHint {
		t.Errorf("no GPU: exit %d, stderr:\n%s\nwant 69, NVML's line, DRM's line and %q", code, stderr.String(), simHint)
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("a line of %d bytes, want short ones: %q", len(l), l)
		}
	}
	if got := exitCode(openExit(errors.New("--devices with the sim backend: bad"))); got != ExitUsage {
		t.Errorf("a bad selection exits %d, want %d", got, ExitUsage)
	}
}
