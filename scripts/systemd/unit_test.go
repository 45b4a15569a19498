package systemd

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const unitFile = "gpuguard@.service"

// directives parses the unit into key -> values (a key may repeat).
func directives(t *testing.T) map[string][]string {
	t.Helper()
	return directivesOf(t, unitFile)
}

func directivesOf(t *testing.T, unitFile string) map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("not a key=value line: %q", line)
		}
		m[k] = append(m[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUnitSettings(t *testing.T) {
	d := directives(t)
	want := map[string]string{
		"Type":                     "notify",
		"NotifyAccess":             "main",
		"KillMode":                 "mixed",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "64 78 126 127", // usage, config, CMD cannot run / not found
		"WatchdogSec":              "30s",
		"OOMPolicy":                "continue",
		"StateDirectory":           "gpuguard",
		"RuntimeDirectory":         "gpuguard",
		"RuntimeDirectoryPreserve": "yes",
		"NoNewPrivileges":          "yes",
		"PrivateTmp":               "yes",
	}
	for k, v := range want {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// A stop forwards SIGTERM, and a server killed by it leaves gpuguard
	// exiting 128+SIGTERM: that is the stop asked for, not a failure.
	success := strings.Fields(strings.Join(d["SuccessExitStatus"], " "))
	for _, code := range []int{128 + int(syscall.SIGTERM), 128 + int(syscall.SIGINT), 128 + int(syscall.SIGHUP)} {
		if !slices.Contains(success, strconv.Itoa(code)) {
			t.Errorf("SuccessExitStatus = %q lacks %d", success, code)
		}
	}
	if slices.Contains(success, strconv.Itoa(128+int(syscall.SIGKILL))) {
		t.Errorf("SuccessExitStatus = %q: a stop that had to SIGKILL is no success", success)
	}
	if exec := strings.Join(d["ExecStart"], ""); !strings.HasPrefix(exec, "/usr/local/bin/gpuguard run --policy /etc/gpuguard/%i.toml") {
		t.Errorf("ExecStart = %q", exec)
	}
	// The reload finds the instance's socket through the unit's own
	// GPUGUARD_RUNTIME_DIR, by the name ExecStart gives it.
	if exec := d["ExecReload"]; len(exec) != 1 || exec[0] != "/usr/local/bin/gpuguard reload %i" {
		t.Errorf("ExecReload = %q, want /usr/local/bin/gpuguard reload %%i", exec)
	}
	env := strings.Join(d["Environment"], " ")
	for _, kv := range []string{"GPUGUARD_STATE_DIR=/var/lib/gpuguard", "GPUGUARD_RUNTIME_DIR=/run/gpuguard"} {
		if !strings.Contains(env, kv) {
			t.Errorf("Environment lacks %s", kv)
		}
	}
	// stop_timeout defaults to 30s: systemd must wait longer than gpuguard.
	stop, err := time.ParseDuration(strings.Join(d["TimeoutStopSec"], ""))
	if err != nil || stop <= 30*time.Second {
		t.Errorf("TimeoutStopSec = %q, want more than the 30s stop_timeout", d["TimeoutStopSec"])
	}
	// Each of these takes /dev/nvidia* away (ProtectClock implies
	// DeviceAllow=char-rtc r, which closes the device policy) or breaks
	// CUDA's JIT.
	for _, k := range []string{"PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "MemoryDenyWriteExecute"} {
		if v, ok := d[k]; ok {
			t.Errorf("%s=%s breaks GPU access or CUDA JIT", k, v)
		}
	}
}

// TestSystemdAnalyzeVerify runs systemd's own checker on an instance of the
// template whose ExecStart points at an executable that exists (verify
// insists).
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuguard")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inst := filepath.Join(dir, "gpuguard@test.service")
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/gpuguard", bin)
	if err := os.WriteFile(inst, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", inst).CombinedOutput()
	// verify exits 0 on unknown keys and bad values, only warning: any
	// line about our unit is a failure.
	if err != nil || strings.Contains(string(out), "gpuguard@") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
