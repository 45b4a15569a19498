// Package nvml is the NVIDIA backend: a gpu.Probe over NVML (go-nvml).
//
// The driver library, libnvidia-ml.so.1, is loaded with dlopen when Open
// runs (found by the dynamic loader, else in the usual driver directories,
// libpath.go), so gpuguard builds and starts on machines without a driver
// and reports gpu.ErrUnavailable there. go-nvml needs cgo; a build without cgo
// gets a stub whose Open always reports gpu.ErrUnavailable.
//
// A MIG instance is watched as a GPU of its own, on its own device handle:
// its UUID, name, memory and processes (on the parent GPU's handle NVML
// gives aggregates, and only to privileged callers).
//
// Device memory is read on every Sample. The per-process query takes the
// driver lock, so it runs at most once per Options.ProcessInterval and the
// samples in between carry the cached processes and their ProcessesAt.
//
// Faults (gpu.FaultSource) listens for Xid and double-bit ECC events on an
// NVML event set, on a goroutine of its own (events.go).
package nvml
