// Package gpu defines the Probe contract that every GPU backend implements
// (NVML, the simulated GPU, npu-smi) and holds the simulated backend. The
// supervisor only ever sees a Probe, never which backend is behind it.
package gpu
