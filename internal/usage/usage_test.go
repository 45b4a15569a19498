package usage

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// TestError: a usage error keeps its text and what it wraps, and is found
// through further wrapping.
func TestError(t *testing.T) {
	err := fmt.Errorf("reading: %w", Errorf("no sim dir: %w", fs.ErrNotExist))
	var ue *Error
	if !errors.As(err, &ue) || !errors.Is(err, fs.ErrNotExist) || err.Error() != "reading: no sim dir: file does not exist" {
		t.Errorf("%v: not found as a usage error wrapping ErrNotExist", err)
	}
	if Wrap(nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
