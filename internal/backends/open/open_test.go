package open

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/gpu"
)

func TestOpenProbeSim(t *testing.T) {
	dir := t.TempDir()
	if err := gpu.SimSet(dir, 1, "tenant", 5); err != nil {
		t.Fatal(err)
	}
	p, err := Probe(Options{Backend: "sim", Devices: []string{"1"}, SimDir: dir, SimDevices: 2, SimMemory: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := p.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Devices) != 1 || s.Devices[0].Index != 1 || s.Devices[0].Used != 5 || s.Devices[0].Total != 100 {
		t.Errorf("sample %+v", s.Devices)
	}
}

func TestOpenProbeErrors(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]Options{
		"unknown backend":  {Backend: "cuda"},
		"sim UUID":         {Backend: "sim", SimDir: dir, Devices: []string{"GPU-1234"}},
		"sim out of range": {Backend: "sim", SimDir: dir, SimDevices: 2, Devices: []string{"2"}},
	} {
		p, err := Probe(o)
		if err == nil {
			p.Close()
			t.Errorf("%s: Probe succeeded", name)
			continue
		}
		if errors.Is(err, gpu.ErrUnavailable) {
			t.Errorf("%s: %v wraps ErrUnavailable (exit 69); want a plain error", name, err)
		}
	}
}

// TestOpenProbeUnavailable: without a driver (this machine) and without an
// amdgpu device, auto and nvml fail with ErrUnavailable (exit 69); so does
// npu-smi without npu-smi.
func TestOpenProbeUnavailable(t *testing.T) {
	for _, b := range []string{"auto", "nvml", ""} {
		p, err := Probe(Options{Backend: b, Sysfs: t.TempDir()}) // no amdgpu either
		if err == nil {
			p.Close()
			t.Skip("NVML works on this machine")
		}
		if !errors.Is(err, gpu.ErrUnavailable) {
			t.Errorf("backend %q: %v, want ErrUnavailable", b, err)
		}
	}
	if _, err := exec.LookPath("npu-smi"); err == nil {
		t.Skip("npu-smi is installed")
	}
	if _, err := Probe(Options{Backend: "npu-smi"}); !errors.Is(err, gpu.ErrUnavailable) {
		t.Errorf("npu-smi: %v, want ErrUnavailable", err)
	}
}

// TestOpenProbeDRM: --backend drm reads the sysfs tree GPUGUARD_SYSFS
// points at; auto falls back to it when NVML is unavailable.
func TestOpenProbeDRM(t *testing.T) {
	sys := "../../drm/testdata/sysfs"
	for _, b := range []string{"drm", "auto"} {
		p, err := Probe(Options{Backend: b, Sysfs: sys, Procfs: t.TempDir(),
			Devices: []string{"GPU-NVIDIA-ONLY"}, DRMDevices: []string{"1"}})
		if b == "drm" {
			if err == nil || errors.Is(err, gpu.ErrUnavailable) {
				t.Errorf("drm with an unknown UUID: %v, want a plain error", err)
			}
			p, err = Probe(Options{Backend: b, Sysfs: sys, Procfs: t.TempDir(), Devices: []string{"1"}})
		}
		if err != nil {
			if b == "auto" && !errors.Is(err, gpu.ErrUnavailable) {
				t.Skipf("NVML answers on this machine: %v", err)
			}
			t.Fatalf("%s: %v", b, err)
		}
		s, err := p.Sample(context.Background())
		p.Close()
		if err != nil || len(s.Devices) != 1 || s.Devices[0].UUID != "0000:15:00.0" {
			t.Errorf("%s: %+v %v, want the testdata's GPU 1", b, s.Devices, err)
		}
	}
}

// TestAutoUnavailable: with neither NVML nor an amdgpu device, auto's
// exit-69 error names what both looked for, in a short line each
// (NotFound); another backend's in one.
func TestAutoUnavailable(t *testing.T) {
	empty := t.TempDir()
	_, err := Probe(Options{Backend: "auto", Sysfs: empty, NVMLLib: empty + "/libnvidia-ml.so.1"})
	if !errors.Is(err, gpu.ErrUnavailable) {
		t.Fatalf("%v, want ErrUnavailable", err)
	}
	want := []string{
		"no GPU found: NVML: cannot load " + empty + "/libnvidia-ml.so.1 (named by GPUGUARD_NVML_LIB)",
		"no GPU found: DRM: no AMD or Intel GPU with memory counters under " + empty + "/class/drm",
	}
	if got := NotFound(err); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("NotFound:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, err = Probe(Options{Backend: "drm", Sysfs: empty})
	if got := NotFound(err); len(got) != 1 || got[0] != want[1] {
		t.Errorf("drm: NotFound %q, want %q", got, want[1:])
	}
}

func TestSelectDevices(t *testing.T) {
	env := map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-a,1", "ROCR_VISIBLE_DEVICES": "2,GPU-B,0", "HIP_VISIBLE_DEVICES": "1",
		"ASCEND_RT_VISIBLE_DEVICES": "3"}
	getenv := func(k string) string { return env[k] }
	flag := "4,5"
	for _, tt := range []struct {
		backend   string
		flag      *string
		dev, drmD []string
	}{
		{"nvml", nil, []string{"GPU-a", "1"}, nil},
		{"auto", nil, []string{"GPU-a", "1"}, []string{"GPU-B"}},
		{"drm", nil, []string{"GPU-B"}, []string{"GPU-B"}},
		{"sim", nil, nil, nil},
		{"npu-smi", nil, []string{"3"}, nil},
		{"auto", &flag, []string{"4", "5"}, []string{"4", "5"}},
		{"drm", &flag, []string{"4", "5"}, []string{"4", "5"}},
	} {
		dev, drmD, err := SelectDevices(tt.backend, tt.flag, getenv)
		if err != nil || !slices.Equal(dev, tt.dev) || !slices.Equal(drmD, tt.drmD) {
			t.Errorf("%s (flag %v): %q %q %v, want %q %q", tt.backend, tt.flag != nil, dev, drmD, err, tt.dev, tt.drmD)
		}
	}
	env["HIP_VISIBLE_DEVICES"] = "7"
	if _, _, err := SelectDevices("drm", nil, getenv); err == nil || !strings.Contains(err.Error(), "HIP_VISIBLE_DEVICES") {
		t.Errorf("HIP index past ROCR's list: %v", err)
	}
	bad := "0,,1"
	if _, _, err := SelectDevices("nvml", &bad, getenv); err == nil || !strings.Contains(err.Error(), "--devices") {
		t.Errorf("bad --devices: %v", err)
	}
}

// TestOpened: the start-up line names auto's choice and the sim dir.
func TestOpened(t *testing.T) {
	p, err := Probe(Options{Backend: "drm", Sysfs: "../../drm/testdata/sysfs", Procfs: t.TempDir(), Devices: []string{"1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tt := range []struct {
		asked string
		probe gpu.Probe
		want  string
	}{
		{"auto", p, "drm (auto)"},
		{"", nil, "nvml (auto)"},
		{"sim", nil, "sim (sim dir /s)"},
		{"npu-smi", nil, "npu-smi"},
	} {
		if got := Opened(tt.asked, tt.probe, "/s"); got != tt.want {
			t.Errorf("Opened(%q) = %q, want %q", tt.asked, got, tt.want)
		}
	}
}
