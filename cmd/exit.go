package cmd

import (
	"errors"
	"fmt"

	"github.com/gpuguard/gpuguard/internal/exitcode"
	"github.com/gpuguard/gpuguard/internal/proc"
	"github.com/gpuguard/gpuguard/internal/usage"
)

// Exit codes of gpuguard, under the names cmd has always used; their
// values live in package exitcode, which the supervisor uses too.
const (
	ExitOK            = exitcode.OK
	ExitFailure       = exitcode.Failure
	ExitUsage         = exitcode.Usage
	ExitUnavailable   = exitcode.Unavailable
	ExitNoFit         = exitcode.NoFit
	ExitConfig        = exitcode.Config
	ExitCannotExecute = exitcode.CannotExecute
	ExitNotFound      = exitcode.NotFound
)

// ExitError carries an exit code up to Main. A nil Err with a code exits
// silently (the child's own status, say). More are lines printed after
// Err's, each as its own "gpuguard: " line (what to do about it).
type ExitError struct {
	Code int
	Err  error
	More []string
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitf builds an ExitError with a formatted message.
func exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// withCode wraps err (if non-nil) with an exit code: an error that has
// one keeps it, and a usage error (package usage, from the packages below
// cmd) is always a usage error.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	var ue *usage.Error
	if errors.As(err, &ue) {
		code = ExitUsage
	}
	return &ExitError{Code: code, Err: err}
}

// commandExit is the exit code for an error that ended a run: 127 or 126
// when the child's command cannot run at all, else code.
func commandExit(err error, code int) int {
	switch {
	case errors.Is(err, proc.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, proc.ErrCannotExecute):
		return ExitCannotExecute
	}
	return code
}

// exitCode maps an error returned by a command to the process exit code.
// Errors without an ExitError are gpuguard's own failures (1), usage
// errors 64; cobra's flag and argument errors are marked as usage
// errors by the root command.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var ue *usage.Error
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailure
}
