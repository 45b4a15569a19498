package gpu

import (
	"context"
	"errors"
	"time"
)

// ErrUnavailable reports that a backend cannot be used on this machine (no
// driver library, built without cgo, ...). Backends wrap it with detail that
// names what was looked for.
var ErrUnavailable = errors.New("GPU backend unavailable")

// ErrGPULost reports that a watched GPU fell off the bus or stopped
// answering. The sample that carries it is not to be used for decisions.
var ErrGPULost = errors.New("GPU is lost")

// Device is one watched GPU at one instant.
type Device struct {
	Index int // the index the backend and CUDA use (after --devices)
	UUID  string
	Name  string
	Used  uint64 // bytes
	Total uint64 // bytes
}

// Process is one process's use of one GPU.
type Process struct {
	PID    int // host PID
	Device int // Device.Index
	Used   uint64
}

// Sample is what one probe tick sees.
type Sample struct {
	Time    time.Time
	Devices []Device
	// Processes is the per-process usage. It may be refreshed less often than
	// device memory (NVML's process query takes the driver lock), so
	// ProcessesAt says when it was taken; a zero ProcessesAt means the
	// backend does not know per-process usage.
	Processes   []Process
	ProcessesAt time.Time
}

// Probe samples the watched GPUs. Implementations need not be safe for
// concurrent use: the supervisor calls Sample from one goroutine at a time.
type Probe interface {
	// Sample reads every watched device. It stops when ctx ends, as far
	// as the backend can (between driver calls; a call in the driver
	// cannot be cut short).
	Sample(ctx context.Context) (Sample, error)
	Close() error
}

// Interruptible is a Probe whose Sample returns at ctx's deadline even
// while the backend is stuck (npu-smi's command is killed). The
// supervisor gives a deadline (the probe timeout) only to the calls of
// such a probe: arming one costs a runtime timer a sample, and a call of
// any other backend that runs past it is noticed by the supervisor on its
// own, not ended by it.
type Interruptible interface {
	Probe
	// Interruptible reports whether Sample honours a deadline.
	Interruptible() bool
}
