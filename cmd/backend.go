package cmd

import (
	"strings"

	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
	"github.com/gpuguard/gpuguard/policy"
)

// checkBackend is the usage error for a --backend value not in the table
// (backends/open's Table).
func checkBackend(name string) error {
	if _, ok := probeopen.Lookup(name); !ok {
		return exitf(ExitUsage, "--backend %q: want one of %s", name, strings.Join(probeopen.Names(), ", "))
	}
	return nil
}

// knownBackends is the option every policy read in cmd passes: [watch]
// backend takes the names of the backend table, the same list as
// --backend.
func knownBackends() policy.Option { return policy.Backends(probeopen.Names()...) }

// simFlags checks --sim-memory and --sim-devices, the simulated GPUs'
// flags that run, status and policy check share, and answers the memory
// in bytes; a bad value is a usage error.
func simFlags(memory string, devices int) (uint64, error) {
	bytes, err := policy.ParseSize(memory)
	if err != nil || bytes == 0 {
		return 0, exitf(ExitUsage, "--sim-memory %q: want a size such as 16GiB", memory)
	}
	if devices < 1 {
		return 0, exitf(ExitUsage, "--sim-devices must be at least 1")
	}
	return bytes, nil
}
