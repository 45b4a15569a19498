// Package nvml is the NVIDIA backend: a gpu.Probe over NVML (go-nvml).
//
// The driver library, libnvidia-ml.so.1, is loaded with dlopen when Open
// runs, so gpuguard builds and starts on machines without a driver and
// reports gpu.ErrUnavailable there. go-nvml needs cgo; a build without cgo
// gets a stub whose Open always reports gpu.ErrUnavailable.
//
// Device memory is read on every Sample. The per-process query takes the
// driver lock, so it runs at most once per Options.ProcessInterval and the
// samples in between carry the cached processes and their ProcessesAt.
package nvml
