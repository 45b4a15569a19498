package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// runOpts parses args through NewCmdRun with runF and returns the options.
func runOpts(t *testing.T, env map[string]string, args ...string) (*RunOptions, int) {
	t.Helper()
	var got *RunOptions
	var errb bytes.Buffer
	io := &IO{Out: &bytes.Buffer{}, ErrOut: &errb, Getenv: func(k string) string { return env[k] }}
	root := NewRootCmd(io)
	for i, c := range root.Commands() {
		if c.Name() == "run" {
			root.RemoveCommand(root.Commands()[i])
			break
		}
	}
	root.AddCommand(NewCmdRun(io, func(o *RunOptions) error { got = o; return nil }))
	root.SetArgs(append([]string{"run"}, args...))
	code := exitCode(root.Execute())
	return got, code
}

func TestRunFlags(t *testing.T) {
	o, code := runOpts(t, nil, "--backend", "sim", "--interval", "100ms", "--observe", "--name", "x",
		"--", "python3", "serve.py", "--port", "8000")
	if code != 0 || o == nil {
		t.Fatalf("exit %d", code)
	}
	if *o.Backend != "sim" || *o.Interval != 100*time.Millisecond || !o.Observe || o.Name != "x" {
		t.Errorf("options %+v", o)
	}
	if !slices.Equal(o.Command, []string{"python3", "serve.py", "--port", "8000"}) {
		t.Errorf("command %q: flags after CMD belong to CMD", o.Command)
	}
	if o.Devices != nil || o.MetricsAddr != nil {
		t.Error("flags not given must stay nil so the policy decides")
	}
	o, _ = runOpts(t, nil, "--metrics-addr", "", "--", "x")
	if o.MetricsAddr == nil || *o.MetricsAddr != "" {
		t.Error("an explicit empty --metrics-addr disables metrics")
	}
	if _, code := runOpts(t, nil, "--interval", "soon"); code != ExitUsage {
		t.Errorf("bad duration: exit %d, want 64", code)
	}
}

func TestResolveRun(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.toml")
	os.WriteFile(pol, []byte(`name = "llama"
command = ["serve", "--batch", "${MAX_BATCH}"]
[watch]
backend = "nvml"
[[profile]]
name = "fp16"
env = { MAX_BATCH = "32" }
[[profile]]
name = "int8"
env = { MAX_BATCH = "16" }
`), 0o644)
	env := map[string]string{"CUDA_VISIBLE_DEVICES": "1,GPU-abc", "GPUGUARD_STATE_DIR": dir, "GPUGUARD_RUNTIME_DIR": dir + "/run"}
	io := &IO{Getenv: func(k string) string { return env[k] }}
	r, err := resolveRun(&RunOptions{IO: io, PolicyFile: pol, Profile: "int8", SimMemory: "16GiB", SimDevices: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.name != "llama" || r.startLevel != 1 || !slices.Equal(r.command, []string{"serve", "--batch", "${MAX_BATCH}"}) {
		t.Errorf("resolved %+v", r)
	}
	if !slices.Equal(r.devices, []string{"1", "GPU-abc"}) {
		t.Errorf("devices %q: CUDA_VISIBLE_DEVICES is the default for nvml", r.devices)
	}
	if r.stateDir != filepath.Join(dir, "llama") || r.runtimeDir != dir+"/run" {
		t.Errorf("dirs %q %q", r.stateDir, r.runtimeDir)
	}
	sim := "sim"
	r, err = resolveRun(&RunOptions{IO: io, Backend: &sim, Command: []string{"/usr/bin/srv"}, SimMemory: "1GiB", SimDevices: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.devices != nil || r.name != "srv" {
		t.Errorf("sim: devices %q name %q; CUDA_VISIBLE_DEVICES does not apply to sim, name defaults to CMD's base name", r.devices, r.name)
	}
	for name, o := range map[string]*RunOptions{
		"unknown profile": {IO: io, PolicyFile: pol, Profile: "int3", SimMemory: "1GiB", SimDevices: 1},
		"bad sim memory":  {IO: io, Backend: &sim, Command: []string{"x"}, SimMemory: "lots", SimDevices: 1},
		"no command":      {IO: io, Backend: &sim, SimMemory: "1GiB", SimDevices: 1},
		"invalid name":    {IO: io, Backend: &sim, Name: "a/b", Command: []string{"x"}, SimMemory: "1GiB", SimDevices: 1},
		"priority range":  {IO: io, Backend: &sim, Priority: ptrTo(1001), Command: []string{"x"}, SimMemory: "1GiB", SimDevices: 1},
	} {
		if _, err := resolveRun(o); exitCode(err) != ExitUsage {
			t.Errorf("%s: %v (exit %d), want 64", name, err, exitCode(err))
		}
	}
	if _, err := resolveRun(&RunOptions{IO: io, Backend: &sim, Command: []string{"x", "${NOPE}"}, SimMemory: "1GiB", SimDevices: 1}); exitCode(err) != ExitConfig {
		t.Errorf("unknown ${VAR}: exit %d, want 78", exitCode(err))
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestResolveRunFlagsWin: --priority and --interval override the policy,
// and the adaptive period's bounds widen to hold the flag's interval.
func TestResolveRunFlagsWin(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.toml")
	os.WriteFile(pol, []byte("priority = 5\n[watch]\nbackend = \"sim\"\n"), 0o644)
	io := &IO{Getenv: func(k string) string { return map[string]string{"GPUGUARD_STATE_DIR": dir}[k] }}
	r, err := resolveRun(&RunOptions{IO: io, PolicyFile: pol, Command: []string{"x"}, SimMemory: "1GiB", SimDevices: 1})
	if err != nil || r.pol.Priority != 5 {
		t.Fatalf("policy priority: %v %+v", err, r)
	}
	iv := 5 * time.Millisecond
	r, err = resolveRun(&RunOptions{IO: io, PolicyFile: pol, Priority: ptrTo(-7), Interval: &iv, Command: []string{"x"}, SimMemory: "1GiB", SimDevices: 1})
	if err != nil {
		t.Fatal(err)
	}
	if w := r.pol.Watch; r.pol.Priority != -7 || w.Interval != iv || w.MinInterval != iv {
		t.Errorf("flags: priority %d, watch %+v", r.pol.Priority, w)
	}
	o, code := runOpts(t, nil, "--priority", "90", "--", "x")
	if code != 0 || o.Priority == nil || *o.Priority != 90 {
		t.Errorf("--priority 90: exit %d, %+v", code, o)
	}
}
