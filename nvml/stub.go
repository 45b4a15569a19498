//go:build !cgo

package nvml

import (
	"fmt"

	"github.com/gpuguard/gpuguard/gpu"
)

// Library stands in for go-nvml's Interface, which needs cgo.
type Library = any

// Open always fails: go-nvml needs cgo, and this gpuguard was built without
// it.
func Open(Options) (gpu.Probe, error) {
	return nil, fmt.Errorf("%w: NVML: this gpuguard was built without cgo (CGO_ENABLED=0), which NVML needs (rebuild with cgo)", gpu.ErrUnavailable)
}
