//go:build cgo

package nvml

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestRealCallLatency measures NVML call latency on the real driver:
// GetMemoryInfo, GetMemoryInfo_v2, GetComputeRunningProcesses (1,000 calls
// each) and gpuguard's probe tick. It needs a GPU and is skipped without
// one; scripts/gpu-smoke.sh runs it on a GPU machine with -v.
func TestRealCallLatency(t *testing.T) {
	lib := openReal(t)
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != gonvml.SUCCESS {
		t.Fatalf("device 0: %v", gonvml.ErrorString(ret))
	}
	const n = 1000
	measure := func(name string, call func() gonvml.Return) {
		d := make([]time.Duration, 0, n)
		for range n {
			t0 := time.Now()
			if ret := call(); ret != gonvml.SUCCESS {
				t.Logf("%s: %v", name, gonvml.ErrorString(ret))
				return
			}
			d = append(d, time.Since(t0))
		}
		slices.Sort(d)
		t.Logf("LATENCY %-28s median %8.1f us  p99 %8.1f us  max %8.1f us  (n=%d)", name,
			us(d[n/2]), us(d[n*99/100]), us(d[n-1]), n)
	}
	measure("GetMemoryInfo", func() gonvml.Return { _, r := dev.GetMemoryInfo(); return r })
	measure("GetMemoryInfo_v2", func() gonvml.Return { _, r := dev.GetMemoryInfo_v2(); return r })
	measure("GetComputeRunningProcesses", func() gonvml.Return { _, r := dev.GetComputeRunningProcesses(); return r })

	p, err := Open(Options{Devices: []string{"0"}, LibraryPath: os.Getenv(EnvLibrary)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	measure("probe tick (cached processes)", func() gonvml.Return {
		if _, err := p.Sample(ctx); err != nil {
			return gonvml.ERROR_UNKNOWN
		}
		return gonvml.SUCCESS
	})
	p2, err := Open(Options{Devices: []string{"0"}, ProcessInterval: time.Nanosecond, LibraryPath: os.Getenv(EnvLibrary)})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	measure("probe tick (process refresh)", func() gonvml.Return {
		if _, err := p2.Sample(ctx); err != nil {
			return gonvml.ERROR_UNKNOWN
		}
		return gonvml.SUCCESS
	})
}

// openReal loads the real driver library as gpuguard does (the dynamic
// loader, then the usual driver directories; $GPUGUARD_NVML_LIB alone when
// set), so the real-hardware tests run where gpuguard does, even when the
// library is not in the loader's cache. It skips without NVML, and with
// -short.
func openReal(t *testing.T) Library {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	lib, err := load(Options{LibraryPath: os.Getenv(EnvLibrary)}, "/", realLibrary)
	if err != nil {
		t.Skipf("no NVML here: %v", err)
	}
	t.Cleanup(func() { lib.Shutdown() })
	return lib
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
