package cmd

import (
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/gpuguard/gpuguard/gpu"
)

func TestOpenProbeSim(t *testing.T) {
	dir := t.TempDir()
	if err := gpu.SimSet(dir, 1, "tenant", 5); err != nil {
		t.Fatal(err)
	}
	p, err := openProbe(probeOptions{Backend: "sim", Devices: []string{"1"}, SimDir: dir, SimDevices: 2, SimMemory: 100})
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
	for name, o := range map[string]probeOptions{
		"unknown backend":  {Backend: "cuda"},
		"sim UUID":         {Backend: "sim", SimDir: dir, Devices: []string{"GPU-1234"}},
		"sim out of range": {Backend: "sim", SimDir: dir, SimDevices: 2, Devices: []string{"2"}},
	} {
		p, err := openProbe(o)
		if err == nil {
			p.Close()
			t.Errorf("%s: openProbe succeeded", name)
			continue
		}
		if errors.Is(err, gpu.ErrUnavailable) {
			t.Errorf("%s: %v wraps ErrUnavailable (exit 69); want a plain error", name, err)
		}
	}
}

// TestOpenProbeUnavailable: without a driver (this machine), auto and nvml
// fail with ErrUnavailable (exit 69); so does npu-smi without npu-smi.
func TestOpenProbeUnavailable(t *testing.T) {
	for _, b := range []string{"auto", "nvml", ""} {
		p, err := openProbe(probeOptions{Backend: b})
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
	if _, err := openProbe(probeOptions{Backend: "npu-smi"}); !errors.Is(err, gpu.ErrUnavailable) {
		t.Errorf("npu-smi: %v, want ErrUnavailable", err)
	}
}
