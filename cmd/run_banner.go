package cmd

import (
	"fmt"

	"github.com/gpuguard/gpuguard/backends"
	"github.com/gpuguard/gpuguard/drm"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// describeRun is the start of `run`'s start-up line: which policy file it
// read (or that it runs on built-in defaults) and which backend it opened.
// `cd repo && gpuguard run -- sleep 30` silently took ./policy.toml, with
// its simulated GPU, before this line said so. The supervisor adds the
// watched GPUs once it has read them.
func describeRun(pol *policy.Policy, asked string, probe gpu.Probe, simDir string) string {
	src := "built-in defaults (no " + policy.DefaultFile + ")"
	if pol.Source != "" {
		src = pol.Source
	}
	return fmt.Sprintf("policy %s, backend %s", src, backendOpened(asked, probe, simDir))
}

// backendOpened names the backend that runs: auto's choice, and the sim
// dir of the simulated GPU.
func backendOpened(asked string, probe gpu.Probe, simDir string) string {
	switch asked {
	case "", backends.Auto:
		if _, ok := probe.(*drm.Probe); ok {
			return "drm (auto)"
		}
		return "nvml (auto)"
	case backends.Sim:
		return "sim (sim dir " + simDir + ")"
	}
	return asked
}
