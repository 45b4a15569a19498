package cmd

import (
	"fmt"

	"github.com/gpuguard/gpuguard/gpu"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
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
	return fmt.Sprintf("policy %s, backend %s", src, probeopen.Opened(asked, probe, simDir))
}
