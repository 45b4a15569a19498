//go:build cgo

package nvml

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"

	"github.com/gpuguard/gpuguard/gpu"
)

func mustOpen(t testing.TB, o Options) *probe {
	t.Helper()
	p, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p.(*probe)
}

func mustSample(t testing.TB, p gpu.Probe) gpu.Sample {
	t.Helper()
	s, err := p.Sample(context.Background())
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	return s
}

func TestOpenListsDevices(t *testing.T) {
	srv := newH200()
	setUsed(dev(srv, 3), 40<<30)
	p := mustOpen(t, Options{Lib: srv})
	s := mustSample(t, p)
	if len(s.Devices) != 8 {
		t.Fatalf("got %d devices, want 8", len(s.Devices))
	}
	seen := make(map[string]bool)
	for i, d := range s.Devices {
		m := dev(srv, i)
		want := gpu.Device{Index: i, UUID: m.UUID, Name: m.Config.Name, Total: m.MemoryInfo.Total}
		if i == 3 {
			want.Used = 40 << 30
		}
		if d != want {
			t.Errorf("device %d = %+v, want %+v", i, d, want)
		}
		// What dgxh200 is: an H200 SXM5 with 141 GB (144384 MiB).
		if d.Name != gpus.H200_SXM5_141GB.Name || d.Total != gpus.H200_SXM5_141GB.MemoryMB<<20 {
			t.Errorf("device %d is %q with %d bytes, want an H200 with 144384 MiB", i, d.Name, d.Total)
		}
		if !strings.HasPrefix(d.UUID, "GPU-") || seen[d.UUID] {
			t.Errorf("device %d: UUID %q is not a fresh GPU- UUID", i, d.UUID)
		}
		seen[d.UUID] = true
	}
}

func TestMemoryCountsReserved(t *testing.T) {
	srv := newH200()
	dev(srv, 0).GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		return gonvml.Memory_v2{Total: 1000, Reserved: 50, Used: 200, Free: 750}, gonvml.SUCCESS
	}
	p := mustOpen(t, Options{Lib: srv, Devices: []string{"0"}})
	if d := mustSample(t, p).Devices[0]; d.Used != 250 || d.Total != 1000 {
		t.Errorf("got used %d total %d, want 250 of 1000 (v2 Used + Reserved)", d.Used, d.Total)
	}
}

func TestSelect(t *testing.T) {
	srv := newH200()
	u := uuids(srv)
	for _, tc := range []struct {
		sel  []string
		want []int
	}{
		{nil, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{[]string{"3", "1"}, []int{3, 1}},
		{[]string{u[5]}, []int{5}},
		{[]string{uniquePrefix(u, 6), "2"}, []int{6, 2}}, // a unique UUID prefix, as CUDA takes
	} {
		p := mustOpen(t, Options{Lib: srv, Devices: tc.sel})
		var got []int
		for _, d := range mustSample(t, p).Devices {
			got = append(got, d.Index)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("select %q: got %v, want %v", tc.sel, got, tc.want)
		}
	}
}

func TestSelectErrors(t *testing.T) {
	srv := newH200()
	u := uuids(srv)
	for _, tc := range []struct {
		sel  []string
		want string
	}{
		{[]string{"8"}, "no such GPU"},
		{[]string{"-1"}, "no such GPU"},
		{[]string{absentPrefix(u)}, "no GPU has this UUID"},
		{[]string{"GPU-"}, "ambiguous"}, // every UUID starts so
		{[]string{"1", u[1]}, "listed twice"},
		{[]string{"MIG-1234"}, "MIG"},
		{[]string{"gpu0"}, "want an index or a UUID"},
	} {
		sel := tc.sel
		shutdowns := len(srv.ShutdownCalls())
		_, err := Open(Options{Lib: srv, Devices: sel})
		if err == nil {
			t.Errorf("select %q: Open succeeded, want an error", sel)
			continue
		}
		if errors.Is(err, gpu.ErrUnavailable) {
			t.Errorf("select %q: %v wraps ErrUnavailable; a bad selection is not", sel, err)
		}
		if !strings.Contains(err.Error(), sel[len(sel)-1]) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("select %q: error %q does not name the entry and say %q", sel, err, tc.want)
		}
		if len(srv.ShutdownCalls()) != shutdowns+1 {
			t.Errorf("select %q: NVML not shut down after a failed Open", sel)
		}
	}
}

func TestInitErrorsAreUnavailable(t *testing.T) {
	for _, ret := range []gonvml.Return{
		gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED,
		gonvml.ERROR_LIB_RM_VERSION_MISMATCH, gonvml.ERROR_NO_PERMISSION, gonvml.ERROR_UNKNOWN,
	} {
		srv := newH200()
		srv.InitFunc = func() gonvml.Return { return ret }
		_, err := Open(Options{Lib: srv})
		if !errors.Is(err, gpu.ErrUnavailable) {
			t.Errorf("Init %v: Open error %v, want ErrUnavailable", ret, err)
		}
	}
	srv := newH200()
	srv.InitFunc = func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }
	_, err := Open(Options{Lib: srv})
	for _, want := range []string{"libnvidia-ml.so.1", "GPUGUARD_NVML_LIB=PATH"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("library not found: error %q does not mention %q", err, want)
		}
	}
	if n, m := len(srv.DeviceGetCountCalls()), len(srv.ShutdownCalls()); n != 0 || m != 0 {
		t.Errorf("library not found: %d device counts and %d shutdowns after the failed Init, want none", n, m)
	}
}

func TestNoGPUIsUnavailable(t *testing.T) {
	srv := newH200()
	srv.Devices = nil
	if _, err := Open(Options{Lib: srv}); !errors.Is(err, gpu.ErrUnavailable) {
		t.Errorf("no GPU: Open error %v, want ErrUnavailable", err)
	}
}

// TestRealLibrary opens the real libnvidia-ml: on a machine without it,
// Open must fail cleanly with ErrUnavailable, never crash; on a GPU
// machine it takes one real sample.
func TestRealLibrary(t *testing.T) {
	p, err := Open(Options{LibraryPath: os.Getenv(EnvLibrary)})
	if err == nil {
		defer p.Close()
		s := mustSample(t, p)
		if len(s.Devices) == 0 {
			t.Fatal("NVML works but the sample has no device")
		}
		for _, d := range s.Devices {
			t.Logf("GPU %d %s %q: %d of %d bytes used", d.Index, d.UUID, d.Name, d.Used, d.Total)
			if d.Total == 0 || d.Used > d.Total || !strings.HasPrefix(d.UUID, "GPU-") {
				t.Errorf("implausible device %+v", d)
			}
		}
		t.Logf("processes %+v at %v", s.Processes, s.ProcessesAt)
		return
	}
	if !errors.Is(err, gpu.ErrUnavailable) {
		t.Fatalf("Open without a driver: %v, want ErrUnavailable", err)
	}
	t.Logf("Open: %v", err)

	_, err = Open(Options{LibraryPath: "/nonexistent/libnvidia-ml.so.1"})
	if !errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), "/nonexistent/libnvidia-ml.so.1") {
		t.Errorf("Open with a missing LibraryPath: %v, want ErrUnavailable naming the path", err)
	}
}

func TestClose(t *testing.T) {
	srv := newH200()
	p, err := Open(Options{Lib: srv})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	if _, err := p.Sample(context.Background()); err == nil {
		t.Error("Sample after Close succeeded")
	}
}
