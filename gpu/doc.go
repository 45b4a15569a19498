// Package gpu defines the Probe contract that every GPU backend implements
// (NVML, DRM, the simulated GPU, npu-smi), the fault events some of them
// report (Fault, FaultSource, and what an Xid means: ClassifyXid), and holds
// the simulated backend (Sim, SimSet, SimXid) and the Huawei Ascend one
// (NPUSMI, which parses `npu-smi info`). The NVML backend lives in package
// nvml because it needs cgo, the DRM one in package drm. The supervisor only
// ever sees a Probe, never which backend is behind it.
package gpu
