package cmd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpuguard/gpuguard/internal/proc"
	"github.com/gpuguard/gpuguard/internal/usage"
)

func TestCommandExit(t *testing.T) {
	missing := proc.Check(proc.Spec{Argv: []string{"gpuguard-no-such-cmd"}, Env: []string{"PATH=/nonexistent"}})
	dir := proc.Check(proc.Spec{Argv: []string{"/"}})
	for _, tc := range []struct {
		name string
		err  error
		code int
		want int
	}{
		{"not found", missing, 1, ExitNotFound},
		{"cannot execute", dir, 1, ExitCannotExecute},
		{"wrapped", fmt.Errorf("starting: %w", missing), 1, ExitNotFound},
		{"own failure", errors.New("fork: resource temporarily unavailable"), 1, ExitFailure},
		{"no fit", errors.New("no profile fits"), ExitNoFit, ExitNoFit},
	} {
		if got := commandExit(tc.err, tc.code); got != tc.want {
			t.Errorf("%s (%v): %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestPackageUsageErrorsExit64: a usage error from a package below cmd exits 64
// however it is wrapped, and withCode does not turn it into another code.
func TestPackageUsageErrorsExit64(t *testing.T) {
	err := fmt.Errorf("sim: %w", usage.Errorf("no sim dir: pass --dir"))
	if got := exitCode(err); got != ExitUsage {
		t.Errorf("exitCode(%v) = %d, want %d", err, got, ExitUsage)
	}
	if got := exitCode(withCode(ExitFailure, err)); got != ExitUsage {
		t.Errorf("exitCode(withCode(1, %v)) = %d, want %d", err, got, ExitUsage)
	}
	if got := exitCode(withCode(ExitFailure, errors.New("disk full"))); got != ExitFailure {
		t.Errorf("a plain error under withCode(1) exits %d, want 1", got)
	}
}
