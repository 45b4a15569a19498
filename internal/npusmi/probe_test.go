package npusmi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/gpu"
)

const mib = 1 << 20

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The testdata files are `npu-smi info` tables as published in public
// Ascend docs and issues (PIDs and numbers varied).
func TestParseNPUSMI(t *testing.T) {
	for _, tc := range []struct {
		file  string
		devs  []gpu.Device
		procs []gpu.Process
	}{{
		file: "npusmi-910b.txt",
		devs: []gpu.Device{
			{Index: 0, UUID: "NPU-0-0", Name: "Ascend 910B1", Used: 56017 * mib, Total: 65536 * mib},
			{Index: 1, UUID: "NPU-1-0", Name: "Ascend 910B1", Used: 55358 * mib, Total: 65536 * mib},
			{Index: 2, UUID: "NPU-2-0", Name: "Ascend 910B1", Used: 3412 * mib, Total: 65536 * mib},
		},
		procs: []gpu.Process{
			{PID: 3755936, Device: 0, Used: 114 * mib},
			{PID: 3755939, Device: 0, Used: 114 * mib},
			{PID: 3755935, Device: 0, Used: 52245 * mib},
			{PID: 3755936, Device: 1, Used: 51829 * mib},
		},
	}, {
		file: "npusmi-910a.txt", // HBM, not the AI CPU's DDR
		devs: []gpu.Device{
			{Index: 0, UUID: "NPU-0-0", Name: "Ascend 910B", Used: 1365 * mib, Total: 32768 * mib},
			{Index: 1, UUID: "NPU-1-0", Name: "Ascend 910B", Used: 0, Total: 32768 * mib},
		},
	}, {
		file: "npusmi-310p.txt", // two chips on one card, logical Device ids
		devs: []gpu.Device{
			{Index: 0, UUID: "NPU-1-0", Name: "Ascend 310P3", Used: 1657 * mib, Total: 44280 * mib},
			{Index: 1, UUID: "NPU-1-1", Name: "Ascend 310P3", Used: 1573 * mib, Total: 43693 * mib},
			{Index: 2, UUID: "NPU-6-0", Name: "Ascend 310P3", Used: 1839 * mib, Total: 21525 * mib},
		},
		procs: []gpu.Process{{PID: 4242, Device: 1, Used: 800 * mib}},
	}, {
		file: "npusmi-910-phyid.txt",
		devs: []gpu.Device{
			{Index: 4, UUID: "NPU-2-0", Name: "Ascend910", Used: 62449 * mib, Total: 65536 * mib},
			{Index: 5, UUID: "NPU-2-1", Name: "Ascend910", Used: 62498 * mib, Total: 65536 * mib},
		},
		procs: []gpu.Process{
			{PID: 824166, Device: 4, Used: 59316 * mib},
			{PID: 845053, Device: 5, Used: 59656 * mib},
		},
	}} {
		got, err := parseNPUSMI(readTestdata(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if !reflect.DeepEqual(got.Devices, tc.devs) {
			t.Errorf("%s: devices\n got %+v\nwant %+v", tc.file, got.Devices, tc.devs)
		}
		if !reflect.DeepEqual(got.Processes, tc.procs) {
			t.Errorf("%s: processes\n got %+v\nwant %+v", tc.file, got.Processes, tc.procs)
		}
	}
}

func TestParseNPUSMIErrors(t *testing.T) {
	good := readTestdata(t, "npusmi-910b.txt")
	for name, text := range map[string]string{
		"empty":          "",
		"not a table":    "dcmi module initialize failed. ret is -8005\n",
		"broken memory":  strings.Replace(good, "56017/ 65536", "n/a", 1),
		"unknown chip":   strings.Replace(good, "| 1       0                 | 3755936", "| 9       0                 | 3755936", 1),
		"broken process": strings.Replace(good, "| 52245 ", "| lots  ", 1),
	} {
		if _, err := parseNPUSMI(text); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

// fakeNPUSMI is an executable that prints a testdata table.
func fakeNPUSMI(t *testing.T, file string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "npu-smi")
	script := "#!/bin/sh\n[ \"$1\" = info ] || exit 2\nexec cat '" + abs + "'\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestNPUSMIProbe(t *testing.T) {
	exe := fakeNPUSMI(t, "npusmi-910b.txt")
	p, err := Open(context.Background(), Options{Command: exe, Select: []string{"1", "NPU-0-0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := p.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Devices) != 2 || s.Devices[0].Index != 1 || s.Devices[1].Index != 0 {
		t.Errorf("devices %+v, want NPUs 1 and 0", s.Devices)
	}
	if len(s.Processes) != 4 || s.ProcessesAt.IsZero() {
		t.Errorf("processes %+v at %v, want 4", s.Processes, s.ProcessesAt)
	}

	p, err = Open(context.Background(), Options{Command: exe, Select: []string{"2"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err = p.Sample(context.Background())
	if err != nil || len(s.Devices) != 1 || len(s.Processes) != 0 {
		t.Errorf("NPU 2 only: %+v, %v", s, err)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(context.Background(), Options{Command: "no-such-npu-smi-here"})
	if !errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), "--backend sim") {
		t.Errorf("missing npu-smi: %v, want gpu.ErrUnavailable suggesting --backend sim", err)
	}
	failing := filepath.Join(t.TempDir(), "npu-smi")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'dcmi module initialize failed' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), Options{Command: failing})
	if !errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), "dcmi") {
		t.Errorf("failing npu-smi: %v, want gpu.ErrUnavailable with its stderr", err)
	}
	_, err = Open(context.Background(), Options{Command: fakeNPUSMI(t, "npusmi-910b.txt"), Select: []string{"7"}})
	if err == nil || errors.Is(err, gpu.ErrUnavailable) {
		t.Errorf("unknown NPU: %v, want a plain error", err)
	}
}

// TestInterruptible: npu-smi's calls can be cut short (the command is
// killed at the deadline), so it says so, and the supervisor gives them
// the probe timeout as their deadline.
func TestInterruptible(t *testing.T) {
	var p gpu.Probe = &Probe{}
	if i, ok := p.(gpu.Interruptible); !ok || !i.Interruptible() {
		t.Fatal("npu-smi's probe does not say it honours a deadline")
	}
}
