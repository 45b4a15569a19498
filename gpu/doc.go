// Package gpu defines the Probe contract that every GPU backend implements
// (NVML, DRM, npu-smi, the simulated GPU), the fault events some of them
// report (Fault, FaultSource, and what an Xid means: ClassifyXid), and holds
// the simulated backend (Sim, SimSet, SimXid). The other backends have rooms
// of their own: nvml (it needs cgo), drm and npusmi; the one table of
// backends (name, visible-devices variables, opener) is backends/open's
// Table. The supervisor only ever sees a Probe, never
// which backend is behind it.
package gpu
