package cmd

import (
	"strings"

	"github.com/gpuguard/gpuguard/backends"
)

// checkBackend is the usage error for a --backend value not in the table
// (backends.Table; the openers are backends/open's).
func checkBackend(name string) error {
	if _, ok := backends.Lookup(name); !ok {
		return exitf(ExitUsage, "--backend %q: want one of %s", name, strings.Join(backends.Names(), ", "))
	}
	return nil
}
