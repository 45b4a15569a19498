package cmd

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
)

// TestBackendFlagsFromTable: run and status accept exactly the table's
// names, and their help lists them and the visible-devices variables.
func TestBackendFlagsFromTable(t *testing.T) {
	for _, name := range probeopen.Names() {
		if err := checkBackend(name); err != nil {
			t.Errorf("checkBackend(%q): %v", name, err)
		}
	}
	err := checkBackend("cuda")
	if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), strings.Join(probeopen.Names(), ", ")) {
		t.Errorf("checkBackend(cuda): %v (exit %d), want a usage error listing the backends", err, exitCode(err))
	}
	for _, c := range []*cobra.Command{NewCmdRun(&IO{}, nil), NewCmdStatus(&IO{}, nil)} {
		if u := c.Flags().Lookup("backend").Usage; !strings.Contains(u, "auto, nvml, drm, sim or npu-smi") {
			t.Errorf("%s --backend help %q does not list the backends", c.Name(), u)
		}
		want := "(default CUDA_VISIBLE_DEVICES; for drm ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES; for npu-smi ASCEND_RT_VISIBLE_DEVICES; else all)"
		if u := c.Flags().Lookup("devices").Usage; !strings.HasSuffix(u, want) {
			t.Errorf("%s --devices help %q, want it to end %q", c.Name(), u, want)
		}
	}
}
