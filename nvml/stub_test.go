//go:build !cgo

package nvml

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/gpu"
)

func TestStubIsUnavailable(t *testing.T) {
	_, err := Open(Options{})
	if !errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), "cgo") {
		t.Errorf("Open without cgo: %v, want ErrUnavailable mentioning cgo", err)
	}
}
