package cmd

import (
	"strings"

	probeopen "github.com/gpuguard/gpuguard/backends/open"
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
