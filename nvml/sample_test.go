//go:build cgo

package nvml

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"

	"github.com/gpuguard/gpuguard/gpu"
)

func TestV2NotSupportedFallsBackToV1(t *testing.T) {
	srv := newH200()
	d := dev(srv, 1)
	setUsed(d, 7<<30) // the mock's own GetMemoryInfo (v1) reports MemoryInfo
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		return gonvml.Memory_v2{}, gonvml.ERROR_NOT_SUPPORTED
	}
	p := mustOpen(t, Options{Lib: srv, Devices: []string{"1"}})
	for range 3 {
		if got := mustSample(t, p).Devices[0].Used; got != 7<<30 {
			t.Fatalf("used = %d, want %d from v1", got, uint64(7<<30))
		}
	}
	if n := len(d.GetMemoryInfo_v2Calls()); n != 1 {
		t.Errorf("v2 called %d times, want once: the fallback is remembered", n)
	}
	if n := len(d.GetMemoryInfoCalls()); n != 3 {
		t.Errorf("v1 called %d times, want 3", n)
	}
}

func TestV2SymbolMissingUsesV1(t *testing.T) {
	srv := newH200()
	srv.LookupSymbolFunc = func(s string) error { return errors.New("undefined symbol " + s) }
	p := mustOpen(t, Options{Lib: srv, Devices: []string{"0"}})
	mustSample(t, p)
	if n := len(dev(srv, 0).GetMemoryInfo_v2Calls()); n != 0 {
		t.Errorf("v2 called %d times though the library lacks it", n)
	}
}

// TestGPULostAndBack: ERROR_GPU_IS_LOST mid-run fails the sample; the GPU
// is looked up again by UUID on every Sample and, once back after a reset
// under a new handle, watched again.
func TestGPULostAndBack(t *testing.T) {
	srv := newH200()
	d := dev(srv, 2)
	setUsed(d, 1<<30)
	p := mustOpen(t, Options{Lib: srv})
	for range 3 {
		if got := mustSample(t, p).Devices[2].Used; got != 1<<30 {
			t.Fatalf("before the loss: used %d, want %d", got, uint64(1<<30))
		}
	}

	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		return gonvml.Memory_v2{}, gonvml.ERROR_GPU_IS_LOST
	}
	_, err := p.Sample(context.Background())
	if !errors.Is(err, gpu.ErrGPULost) || !errors.Is(err, gonvml.ERROR_GPU_IS_LOST) {
		t.Fatalf("Sample with a lost GPU: %v, want ErrGPULost", err)
	}
	if !strings.Contains(err.Error(), "GPU 2") || !strings.Contains(err.Error(), d.UUID) {
		t.Errorf("error %q does not name GPU 2 and its UUID", err)
	}

	// Still gone: the UUID lookup fails too.
	byUUID := srv.DeviceGetHandleByUUIDFunc
	srv.DeviceGetHandleByUUIDFunc = func(string) (gonvml.Device, gonvml.Return) {
		return nil, gonvml.ERROR_GPU_IS_LOST
	}
	if _, err := p.Sample(context.Background()); !errors.Is(err, gpu.ErrGPULost) {
		t.Fatalf("Sample while the GPU is still lost: %v, want ErrGPULost", err)
	}
	if n := len(srv.DeviceGetHandleByUUIDCalls()); n != 1 {
		t.Errorf("UUID looked up %d times, want once", n)
	}

	// Back after a reset, under a new handle: a fresh mock H200 with the
	// same UUID in the server's slot 2, found by the mock's own lookup.
	// The old handle stays lost and must not be asked again.
	back := mockQueries(dgxh200.NewDevice(2))
	back.UUID = d.UUID
	setUsed(back, 3<<30)
	srv.Devices[2] = back
	srv.DeviceGetHandleByUUIDFunc = byUUID
	oldCalls := len(d.GetMemoryInfo_v2Calls())
	for range 2 { // and it stays found
		if got := mustSample(t, p).Devices[2].Used; got != 3<<30 {
			t.Errorf("after the GPU came back: used %d, want %d", got, uint64(3<<30))
		}
	}
	if n := len(d.GetMemoryInfo_v2Calls()); n != oldCalls {
		t.Errorf("the lost handle was queried %d more times", n-oldCalls)
	}
}

func TestProcessesRefreshOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		setProcs(dev(srv, 0), gonvml.ProcessInfo{Pid: 100, UsedGpuMemory: 10 << 30})
		setProcs(dev(srv, 5),
			gonvml.ProcessInfo{Pid: 200, UsedGpuMemory: 20 << 30},
			gonvml.ProcessInfo{Pid: 201, UsedGpuMemory: 1 << 30})
		p := mustOpen(t, Options{Lib: srv, ProcessInterval: time.Second})
		calls := func() int { return len(dev(srv, 0).GetComputeRunningProcessesCalls()) }

		t0 := time.Now()
		s := mustSample(t, p)
		want := []gpu.Process{
			{PID: 100, Device: 0, Used: 10 << 30},
			{PID: 200, Device: 5, Used: 20 << 30},
			{PID: 201, Device: 5, Used: 1 << 30},
		}
		if !reflect.DeepEqual(s.Processes, want) || !s.ProcessesAt.Equal(t0) {
			t.Fatalf("processes %+v at %v, want %+v at %v", s.Processes, s.ProcessesAt, want, t0)
		}

		setProcs(dev(srv, 0)) // the process ends; the cache still shows it
		for range 5 {
			time.Sleep(199 * time.Millisecond) // fake time, inside the bubble
			s = mustSample(t, p)
			if !s.ProcessesAt.Equal(t0) || len(s.Processes) != 3 {
				t.Fatalf("at +%v: processes %+v at %v, want the cache from %v", time.Since(t0), s.Processes, s.ProcessesAt, t0)
			}
		}
		if n := calls(); n != 1 {
			t.Fatalf("process query ran %d times in %v, want 1", n, time.Since(t0))
		}

		time.Sleep(5 * time.Millisecond) // now 1s since the refresh
		s = mustSample(t, p)
		if n := calls(); n != 2 {
			t.Fatalf("process query ran %d times after 1s, want 2", n)
		}
		if !s.ProcessesAt.Equal(time.Now()) || !reflect.DeepEqual(s.Processes, want[1:]) {
			t.Errorf("after refresh: %+v at %v", s.Processes, s.ProcessesAt)
		}
	})
}

func TestProcessesUnknown(t *testing.T) {
	srv := newH200()
	for i := range srv.Devices {
		dev(srv, i).GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			return nil, gonvml.ERROR_NOT_SUPPORTED
		}
	}
	dev(srv, 0).GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return []gonvml.ProcessInfo{{Pid: 9, UsedGpuMemory: ^uint64(0)}}, gonvml.SUCCESS
	}
	s := mustSample(t, mustOpen(t, Options{Lib: srv}))
	if s.ProcessesAt.IsZero() || !reflect.DeepEqual(s.Processes, []gpu.Process{{PID: 9, Device: 0}}) {
		t.Errorf("one GPU knows: %+v at %v, want PID 9 with unknown (0) usage", s.Processes, s.ProcessesAt)
	}

	s = mustSample(t, mustOpen(t, Options{Lib: srv, Devices: []string{"1", "2"}}))
	if !s.ProcessesAt.IsZero() || s.Processes != nil {
		t.Errorf("no GPU knows: %+v at %v, want none at the zero time", s.Processes, s.ProcessesAt)
	}
}

func TestProcessQueryErrorRetries(t *testing.T) {
	srv := newH200()
	d := dev(srv, 0)
	setProcs(d, gonvml.ProcessInfo{Pid: 42, UsedGpuMemory: 1 << 30})
	ok := d.GetComputeRunningProcessesFunc
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return nil, gonvml.ERROR_GPU_IS_LOST
	}
	p := mustOpen(t, Options{Lib: srv, ProcessInterval: time.Hour})
	if _, err := p.Sample(context.Background()); !errors.Is(err, gpu.ErrGPULost) {
		t.Fatalf("Sample: %v, want ErrGPULost", err)
	}
	d.GetComputeRunningProcessesFunc = ok
	s := mustSample(t, p)
	if want := []gpu.Process{{PID: 42, Device: 0, Used: 1 << 30}}; s.ProcessesAt.IsZero() || !reflect.DeepEqual(s.Processes, want) {
		t.Errorf("the failed refresh was not retried on the next Sample: %+v at %v", s.Processes, s.ProcessesAt)
	}
}

func TestSampleHonoursContext(t *testing.T) {
	p := mustOpen(t, Options{Lib: newH200()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}

// TestHungDriver: a Sample stuck in the driver must not block the next
// one past its deadline.
func TestHungDriver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		release := make(chan struct{})
		hang := false
		d := dev(srv, 4)
		healthy := d.GetMemoryInfo_v2Func
		d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
			if hang {
				<-release
			}
			return healthy()
		}
		p := mustOpen(t, Options{Lib: srv})
		hang = true
		done := make(chan error)
		go func() {
			_, err := p.Sample(context.Background())
			done <- err
		}()
		synctest.Wait() // the first Sample is inside the driver

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := p.Sample(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Sample: %v, want DeadlineExceeded", err)
		}
		hang = false
		close(release)
		if err := <-done; err != nil {
			t.Errorf("first Sample: %v", err)
		}
		mustSample(t, p)
	})
}
