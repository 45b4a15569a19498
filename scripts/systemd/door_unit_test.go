package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const doorService = "gpuguard-door.service"

// TestDoorUnit: the door runs `gpuguard door` on the instances' runtime
// dir (the main unit's), restarts on failure but not on a usage error, and
// is enabled on its own.
func TestDoorUnit(t *testing.T) {
	d := directivesOf(t, doorService)
	for k, v := range map[string]string{
		"ExecStart":                "/usr/local/bin/gpuguard door",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "64",
		"WantedBy":                 "multi-user.target",
	} {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: %s = %q, want %q", doorService, k, got, v)
		}
	}
	var runtimeDir string
	for _, kv := range strings.Fields(strings.Join(directives(t)["Environment"], " ")) {
		if strings.HasPrefix(kv, "GPUGUARD_RUNTIME_DIR=") {
			runtimeDir = kv
		}
	}
	if got := strings.Join(d["Environment"], " "); runtimeDir == "" || got != runtimeDir {
		t.Errorf("%s: Environment %q, want the main unit's %q (the same runtime dir)", doorService, got, runtimeDir)
	}
}

// TestDoorUnitVerify runs systemd-analyze verify on the unit.
func TestDoorUnitVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuguard")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(doorService)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, doorService)
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(text), "/usr/local/bin/gpuguard", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", unit).CombinedOutput()
	if err != nil || strings.Contains(string(out), "gpuguard-door") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
