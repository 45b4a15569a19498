// Package usage marks an error as the user's: a bad flag value, a name
// that is not there, a choice only the user can make. Packages below cmd
// return such errors without knowing exit codes; cmd maps every one to
// exit 64 in one place (cmd/exit.go), whatever wraps it.
package usage

import "fmt"

// Error is an error in what the user asked for. Its text is Err's.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is a usage error with a formatted message (%w wraps).
func Errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// Wrap marks err (if non-nil) as a usage error.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}
