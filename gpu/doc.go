// Package gpu defines the Probe contract that every GPU backend implements
// (NVML, the simulated GPU, npu-smi) and holds the simulated backend (Sim,
// SimSet) and the Huawei Ascend one (NPUSMI, which parses `npu-smi info`).
// The NVML backend lives in package nvml because it needs cgo. The
// supervisor only ever sees a Probe, never which backend is behind it.
package gpu
