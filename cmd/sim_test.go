package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runSim runs gpuguard with args and the given environment.
func runSim(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(&IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
		Getenv: func(k string) string { return env[k] }}, args)
	return code, out.String(), errOut.String()
}

func readSimFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSimSetSizes(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GPUGUARD_STATE_DIR": t.TempDir()}
	for _, tc := range []struct{ size, want string }{
		{"1234", "1234\n"},
		{"12GiB", "12884901888\n"},
		{"1.5GB", "1500000000\n"},
		{"2KiB", "2048\n"},
	} {
		code, out, errOut := runSim(t, env, "sim", "set", "--dir", dir, "--gpu", "1", "tenant", tc.size)
		if code != 0 {
			t.Fatalf("sim set %s: exit %d, %s", tc.size, code, errOut)
		}
		if got := readSimFile(t, filepath.Join(dir, "1", "tenant")); got != tc.want {
			t.Errorf("sim set %s: file holds %q, want %q", tc.size, got, tc.want)
		}
		if !strings.Contains(out, filepath.Join(dir, "1", "tenant")) {
			t.Errorf("sim set %s: output %q does not name the file", tc.size, out)
		}
	}
	if code, _, errOut := runSim(t, env, "sim", "set", "--dir", dir, "--gpu", "1", "tenant", "0"); code != 0 {
		t.Fatalf("sim set 0: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "1", "tenant")); !os.IsNotExist(err) {
		t.Errorf("sim set 0 left the file: %v", err)
	}
	if code, _, errOut := runSim(t, env, "sim", "set", "--dir", dir, "never-set", "0"); code != 0 {
		t.Errorf("removing a missing file: exit %d, %s", code, errOut)
	}
}

func TestSimSetDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GPUGUARD_SIM_DIR": dir, "GPUGUARD_STATE_DIR": t.TempDir()}
	if code, _, errOut := runSim(t, env, "sim", "set", "4242", "1MiB"); code != 0 {
		t.Fatalf("exit %d, %s", code, errOut)
	}
	if got := readSimFile(t, filepath.Join(dir, "0", "4242")); got != "1048576\n" {
		t.Errorf("file holds %q", got)
	}
}

func TestSimSetDirFromStateRoot(t *testing.T) {
	root := t.TempDir()
	env := map[string]string{"GPUGUARD_STATE_DIR": root}
	mkdir := func(p string) {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	code, _, errOut := runSim(t, env, "sim", "set", "x", "1")
	if code != ExitUsage || !strings.Contains(errOut, "--dir") {
		t.Errorf("no instance: exit %d, %q; want 64 naming --dir", code, errOut)
	}

	mkdir("nosim")
	mkdir("llama/sim/0")
	if code, _, errOut := runSim(t, env, "sim", "set", "x", "1"); code != 0 {
		t.Fatalf("one instance with a sim dir: exit %d, %s", code, errOut)
	}
	if got := readSimFile(t, filepath.Join(root, "llama", "sim", "0", "x")); got != "1\n" {
		t.Errorf("file holds %q", got)
	}

	mkdir("other/sim")
	code, _, errOut = runSim(t, env, "sim", "set", "x", "1")
	if code != ExitUsage || !strings.Contains(errOut, "--dir") {
		t.Errorf("two instances: exit %d, %q; want 64 naming --dir", code, errOut)
	}

	// A runtime dir that cannot be listed is said, not taken for one where
	// no instance runs.
	notDir := filepath.Join(root, "llama", "sim", "0", "x")
	code, _, errOut = runSim(t, env, "sim", "set", "--runtime-dir", notDir, "x", "1")
	if code != ExitUsage || !strings.Contains(errOut, "warning: asking the running instances for their sim dirs: listing runtime dir") {
		t.Errorf("an unreadable runtime dir: exit %d, %q; want 64 and a warning naming it", code, errOut)
	}
}

func TestSimSetUsageErrors(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GPUGUARD_STATE_DIR": t.TempDir()}
	for _, args := range [][]string{
		{"sim", "set", "--dir", dir, "onlyname"},
		{"sim", "set", "--dir", dir, "a", "1", "extra"},
		{"sim", "set", "--dir", dir, "a", "12 furlongs"},
		{"sim", "set", "--dir", dir, "a", "-5"},
		{"sim", "set", "--dir", dir, ".hidden", "1"},
		{"sim", "set", "--dir", dir, "a/b", "1"},
		{"sim", "set", "--dir", dir, "--gpu", "-1", "a", "1"},
		{"sim", "set", "--dir", dir, "--gpu", "one", "a", "1"},
		{"sim", "set", "--bogus", "a", "1"},
		{"sim"},
		{"sim", "frobnicate"},
	} {
		if code, _, errOut := runSim(t, env, args...); code != ExitUsage {
			t.Errorf("%q: exit %d (%s), want 64", args, code, errOut)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("usage errors wrote to the sim dir: %v", ents)
	}
}

func TestSimSetWarnsBeyondDevices(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runSim(t, nil, "sim", "set", "--dir", dir, "--gpu", "3", "a", "1")
	if code != 0 || !strings.Contains(errOut, "--sim-devices 4") {
		t.Errorf("exit %d, stderr %q; want 0 and a warning naming --sim-devices 4", code, errOut)
	}
}

func TestSimXid(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"GPUGUARD_SIM_DIR": dir}
	code, out, errOut := runSim(t, env, "sim", "xid", "--gpu", "1", "79")
	if code != 0 {
		t.Fatalf("sim xid: exit %d, %s", code, errOut)
	}
	if !strings.Contains(out, "Xid 79") || !strings.Contains(out, "fallen off the bus") {
		t.Errorf("output %q does not say what Xid 79 means", out)
	}
	got := readSimFile(t, filepath.Join(dir, "1", ".xid"))
	if !strings.HasSuffix(got, " 79\n") || strings.Count(got, "\n") != 1 {
		t.Errorf("event file holds %q, want one line ending in 79", got)
	}
	runSim(t, env, "sim", "xid", "--gpu", "1", "13")
	if got := readSimFile(t, filepath.Join(dir, "1", ".xid")); strings.Count(got, "\n") != 2 {
		t.Errorf("a second event did not append: %q", got)
	}
	for _, args := range [][]string{
		{"sim", "xid"},
		{"sim", "xid", "x79"},
		{"sim", "xid", "-1"},
		{"sim", "xid", "--gpu", "-1", "79"},
		{"sim", "xid", "79", "80"},
	} {
		if code, _, _ := runSim(t, env, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
	}
}
