package drm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/drm/drmtest"
)

// copyTree copies testdata/<name> into a temp dir, so a test may change it.
func copyTree(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("testdata", name)
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func open(t *testing.T, o Options) *Probe {
	t.Helper()
	if o.Procfs == "" {
		o.Procfs = t.TempDir()
	}
	p, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return p
}

func sample(t *testing.T, p *Probe) gpu.Sample {
	t.Helper()
	s, err := p.Sample(context.Background())
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	return s
}

// mi300 and mi210 are the testdata tree's two amdgpu devices, in ROCm's
// order (the KFD topology lists 85:00.0 before 15:00.0).
var (
	mi300 = gpu.Device{Index: 0, UUID: "GPU-5B3EDDE6585FCF08", Name: "AMD Instinct MI300X", Used: 30836736, Total: 206141652992}
	mi210 = gpu.Device{Index: 1, UUID: "0000:15:00.0", Name: "AMD GPU (1002:740f)", Used: 68702699520, Total: 68702699520}
)

// TestOpen: the amdgpu devices of the testdata tree in ROCm's order, with
// ROCm's UUID (else the PCI address) and the board's name; the Intel iGPU
// (its memory figures are not readable here), the connector and the
// render node are not GPUs to watch.
func TestOpen(t *testing.T) {
	p := open(t, Options{Sysfs: "testdata/sysfs"})
	if got := sample(t, p).Devices; !reflect.DeepEqual(got, []gpu.Device{mi300, mi210}) {
		t.Errorf("devices\n%+v\nwant\n%+v", got, []gpu.Device{mi300, mi210})
	}
}

// TestOpenWithoutTopology: with no KFD topology, devices are in PCI
// address order.
func TestOpenWithoutTopology(t *testing.T) {
	sys := copyTree(t, "sysfs")
	os.RemoveAll(filepath.Join(sys, "class/kfd"))
	p := open(t, Options{Sysfs: sys})
	var got []string
	for _, d := range sample(t, p).Devices {
		got = append(got, d.UUID)
	}
	if want := []string{"0000:15:00.0", "GPU-5B3EDDE6585FCF08"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v (PCI order)", got, want)
	}
}

// TestUUIDFromTopology: a device without sysfs unique_id takes the one the
// KFD topology gives.
func TestUUIDFromTopology(t *testing.T) {
	got := order([]card{{pci: "0000:15:00.0"}, {pci: "0000:85:00.0"}},
		[]kfdNode{{gpuID: 9, pci: "0000:85:00.0", uniqueID: 0xab}})
	if got[0].uuid != "GPU-00000000000000AB" || got[0].gpuID != 9 || got[1].uuid != "0000:15:00.0" {
		t.Errorf("got %+v", got)
	}
}

func TestSelect(t *testing.T) {
	for _, tt := range []struct {
		sel  []string
		want []int
	}{
		{[]string{"1", "0"}, []int{1, 0}},
		{[]string{"gpu-5b3e"}, []int{0}}, // a UUID prefix, any case, as ROCm takes it
		{[]string{"0000:15:00.0"}, []int{1}},
		{[]string{"85:00.0"}, []int{0}},
	} {
		p := open(t, Options{Sysfs: "testdata/sysfs", Devices: tt.sel})
		var got []int
		for _, d := range sample(t, p).Devices {
			got = append(got, d.Index)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("select %q: %v, want %v", tt.sel, got, tt.want)
		}
	}
}

func TestSelectErrors(t *testing.T) {
	for _, tt := range []struct {
		sel  []string
		want string
	}{
		{[]string{"2"}, "no such GPU"},
		{[]string{"GPU-FFFF"}, "no GPU has this UUID"},
		{[]string{"0000:00:02.0"}, "i915 reports memory use only to CAP_PERFMON or CAP_SYS_ADMIN"},
		{[]string{"0000:99:00.0"}, "no DRM device at this PCI address"},
		{[]string{"0", "85:00.0"}, "listed twice"},
		{[]string{"card0"}, "want an index"},
	} {
		_, err := Open(Options{Sysfs: "testdata/sysfs", Procfs: t.TempDir(), Devices: tt.sel})
		if err == nil || errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("select %q: %v, want a plain error saying %q", tt.sel, err, tt.want)
		}
	}
}

// TestUnavailable: no amdgpu device with counters is ErrUnavailable, and
// the message names what was found and why it cannot be watched.
func TestUnavailable(t *testing.T) {
	sys := copyTree(t, "sysfs")
	os.RemoveAll(filepath.Join(sys, "class/drm/card0"))
	os.Remove(filepath.Join(sys, "class/drm/card1/device/mem_info_vram_used"))
	_, err := Open(Options{Sysfs: sys, Procfs: procWithCaps(t, "0000000000000000")})
	if !errors.Is(err, gpu.ErrUnavailable) {
		t.Fatalf("%v, want ErrUnavailable", err)
	}
	for _, want := range []string{"card1", "mem_info_vram_used", "card2", "i915 reports memory use only to CAP_PERFMON or CAP_SYS_ADMIN, and gpuguard has neither", filepath.Join(sys, "class/drm")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	empty := t.TempDir()
	if _, err := Open(Options{Sysfs: empty}); !errors.Is(err, gpu.ErrUnavailable) || !strings.HasSuffix(err.Error(), "DRM: no AMD or Intel GPU with memory counters under "+filepath.Join(empty, "class", "drm")) {
		t.Errorf("empty sysfs: %v", err)
	}
}

// TestLostAndBack: a device whose sysfs files vanish (unbound, fell off
// the bus) fails samples with ErrGPULost until they are back; a used file
// that does not hold a number is a plain error.
func TestLostAndBack(t *testing.T) {
	sys := copyTree(t, "sysfs")
	p := open(t, Options{Sysfs: sys})
	used := filepath.Join(sys, "class/drm/card1/device/mem_info_vram_used")
	os.Rename(used, used+".gone")
	if _, err := p.Sample(context.Background()); !errors.Is(err, gpu.ErrGPULost) {
		t.Fatalf("vanished: %v, want ErrGPULost", err)
	}
	os.WriteFile(used, []byte("garbage\n"), 0o644)
	if _, err := p.Sample(context.Background()); err == nil || errors.Is(err, gpu.ErrGPULost) {
		t.Fatalf("garbage: %v, want a plain error", err)
	}
	if err := drmtest.SetUsed(sys, 1, 5<<30); err != nil {
		t.Fatal(err)
	}
	if d := sample(t, p).Devices[1]; d.Used != 5<<30 {
		t.Errorf("after the change: %+v", d)
	}
}

// TestProcesses: per-process usage from fdinfo, each client counted once
// across fds and processes, and from KFD for ROCm compute processes (the
// larger of the two where a process has both); processes on unwatched
// devices or without DRM fds do not show.
func TestProcesses(t *testing.T) {
	procfs := t.TempDir()
	for pid, clients := range map[int][]drmtest.Client{
		// Two fds of one client (dup): counted once.
		100: {{FD: 5, PDev: "0000:85:00.0", ID: "19", VRAM: "1024 KiB"}, {FD: 6, PDev: "0000:85:00.0", ID: "19", VRAM: "1024 KiB"},
			{FD: 7, PDev: "0000:15:00.0", ID: "3", VRAM: "2 MiB"}},
		// A child that inherited client 19: the lower PID keeps it; its own client counts.
		101: {{FD: 5, PDev: "0000:85:00.0", ID: "19", VRAM: "1024 KiB"}, {FD: 9, PDev: "0000:85:00.0", ID: "20", VRAM: "512 KiB"}},
		// The Intel iGPU is not watched.
		102: {{FD: 4, PDev: "0000:00:02.0", ID: "1", VRAM: "64 MiB"}},
		// No client id (an old kernel): every fd counts.
		103: {{FD: 3, PDev: "0000:15:00.0", VRAM: "1 MiB"}, {FD: 4, PDev: "0000:15:00.0", VRAM: "1 MiB"}},
		// ROCm: fdinfo shows little, KFD shows the compute memory.
		4242: {{FD: 3, PDev: "0000:85:00.0", ID: "30", VRAM: "4 KiB"}},
		// Nothing on a GPU.
		200: nil,
	} {
		if err := drmtest.WriteProc(procfs, pid, clients); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(procfs, "self"), nil, 0o644) // not a PID
	p := open(t, Options{Sysfs: "testdata/sysfs", Procfs: procfs})
	s := sample(t, p)
	want := []gpu.Process{
		{PID: 100, Device: 0, Used: 1024 * kib},
		{PID: 101, Device: 0, Used: 512 * kib},
		{PID: 4242, Device: 0, Used: 8 << 30},
		{PID: 100, Device: 1, Used: 2 * mib},
		{PID: 103, Device: 1, Used: 2 * mib},
		{PID: 4243, Device: 1, Used: 1 << 30},
	}
	if !reflect.DeepEqual(s.Processes, want) || !s.ProcessesAt.Equal(s.Time) {
		t.Errorf("processes\n%+v\nwant\n%+v (at %v)", s.Processes, want, s.ProcessesAt)
	}

	// Only the watched device's processes.
	p = open(t, Options{Sysfs: "testdata/sysfs", Procfs: procfs, Devices: []string{"1"}})
	var pids []int
	for _, pr := range sample(t, p).Processes {
		pids = append(pids, pr.PID)
	}
	if !reflect.DeepEqual(pids, []int{100, 103, 4243}) {
		t.Errorf("GPU 1 only: %v", pids)
	}
}

// TestOwnFilesNotAProcess: DRM clients that hold no device memory are no
// GPU processes: gpuguard's own files (the Intel render nodes the probe
// holds, listed by the driver at 0 bytes) and another process's empty
// client; a process with memory is.
func TestOwnFilesNotAProcess(t *testing.T) {
	procfs := t.TempDir()
	for pid, vram := range map[int]string{300: "0 KiB", 301: "0 KiB", 302: "4 KiB"} {
		if err := drmtest.WriteProc(procfs, pid, []drmtest.Client{{FD: 5, PDev: "0000:85:00.0", ID: fmt.Sprint(pid), VRAM: vram}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("300", filepath.Join(procfs, "self")); err != nil {
		t.Fatal(err)
	}
	got := sample(t, open(t, Options{Sysfs: "testdata/sysfs", Procfs: procfs})).Processes
	// 4242 and 4243 are the testdata KFD processes.
	want := []gpu.Process{{PID: 302, Device: 0, Used: 4 << 10}, {PID: 4242, Device: 0, Used: 8 << 30}, {PID: 4243, Device: 1, Used: 1 << 30}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("processes %+v, want %+v (not gpuguard's own, 300, nor 301 at 0 bytes)", got, want)
	}
}

// TestProcessInterval: processes are scanned at most once per interval;
// the samples between carry the cached list and its time.
func TestProcessInterval(t *testing.T) {
	procfs := t.TempDir()
	drmtest.WriteProc(procfs, 100, []drmtest.Client{{FD: 5, PDev: "0000:85:00.0", ID: "1", VRAM: "1 MiB"}})
	p := open(t, Options{Sysfs: "testdata/sysfs", Procfs: procfs, ProcessInterval: time.Hour})
	first := sample(t, p)
	drmtest.WriteProc(procfs, 101, []drmtest.Client{{FD: 5, PDev: "0000:85:00.0", ID: "2", VRAM: "1 MiB"}})
	second := sample(t, p)
	if len(second.Processes) != len(first.Processes) || !second.ProcessesAt.Equal(first.ProcessesAt) || second.Time.Equal(first.Time) {
		t.Errorf("within the interval: %+v at %v (first at %v)", second.Processes, second.ProcessesAt, first.ProcessesAt)
	}
	p.procsAt = p.procsAt.Add(-2 * time.Hour)
	if third := sample(t, p); len(third.Processes) != len(first.Processes)+1 {
		t.Errorf("after the interval: %+v", third.Processes)
	}
}

func TestSampleHonoursContext(t *testing.T) {
	p := open(t, Options{Sysfs: "testdata/sysfs"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled", err)
	}
}
