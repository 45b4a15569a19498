package nvml

import "time"

// DefaultProcessInterval is how often per-process usage is refreshed when
// Options.ProcessInterval is 0.
const DefaultProcessInterval = time.Second

// DefaultEventTimeout is how long one wait on the event set lasts when
// Options.EventTimeout is 0: NVIDIA's device plugin waits 5000 ms. It is
// the event goroutine's only wake-up while nothing happens, and bounds how
// long stopping it takes.
const DefaultEventTimeout = 5 * time.Second

// Options configures Open.
type Options struct {
	// Devices selects the watched GPUs by NVML index ("0") or UUID
	// ("GPU-8932f937-..." or a unique prefix of one, as CUDA accepts), or
	// MIG instances by UUID ("MIG-...", "MIG-GPU-<uuid>/<gi>/<ci>") or by
	// their index after the whole GPUs'; nil watches all (a GPU with MIG
	// enabled as its instances). An entry that names no GPU is an error.
	Devices []string
	// ProcessInterval is the least time between per-process refreshes.
	ProcessInterval time.Duration
	// LibraryPath is the driver library to load ($GPUGUARD_NVML_LIB); ""
	// loads libnvidia-ml.so.1 found by the dynamic loader, else by a
	// search of the usual driver directories (libraryDirs).
	LibraryPath string
	// EventTimeout is how long one wait for fault events lasts; 0 means
	// DefaultEventTimeout.
	EventTimeout time.Duration
	// Logf reports what the probe cannot return as an error (fault events
	// that cannot be listened to); nil discards.
	Logf func(format string, args ...any)
	// Lib is the NVML implementation; nil loads the real library. Tests
	// pass go-nvml's mock DGX H200 server (pkg/nvml/mock/dgxh200).
	Lib Library
}

func (o Options) eventTimeout() time.Duration {
	if o.EventTimeout > 0 {
		return o.EventTimeout
	}
	return DefaultEventTimeout
}

func (o Options) logf() func(string, ...any) {
	if o.Logf != nil {
		return o.Logf
	}
	return func(string, ...any) {}
}

func (o Options) processInterval() time.Duration {
	if o.ProcessInterval > 0 {
		return o.ProcessInterval
	}
	return DefaultProcessInterval
}
