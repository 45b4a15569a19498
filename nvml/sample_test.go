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

	"github.com/gpuguard/gpuguard/gpu"
)

func TestV2NotSupportedFallsBackToV1(t *testing.T) {
	srv := newH200()
	d := srv.Devices[1]
	d.setUsed(7 << 30)
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
	if n := len(srv.Devices[0].GetMemoryInfo_v2Calls()); n != 0 {
		t.Errorf("v2 called %d times though the library lacks it", n)
	}
}

func TestGPULostAndBack(t *testing.T) {
	srv := newH200()
	d := srv.Devices[2]
	d.setUsed(1 << 30)
	p := mustOpen(t, Options{Lib: srv})
	mustSample(t, p)

	healthy := d.GetMemoryInfo_v2Func
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
	srv.DeviceGetHandleByUUIDFunc = func(string) (gonvml.Device, gonvml.Return) {
		return nil, gonvml.ERROR_GPU_IS_LOST
	}
	if _, err := p.Sample(context.Background()); !errors.Is(err, gpu.ErrGPULost) {
		t.Fatalf("Sample while the GPU is still lost: %v, want ErrGPULost", err)
	}

	// Back after a reset, under a new handle.
	back := newFakeDevice(2)
	back.UUID = d.UUID
	back.setUsed(3 << 30)
	srv.DeviceGetHandleByUUIDFunc = func(uuid string) (gonvml.Device, gonvml.Return) {
		if uuid == back.UUID {
			return back, gonvml.SUCCESS
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	d.GetMemoryInfo_v2Func = healthy
	s := mustSample(t, p)
	if got := s.Devices[2].Used; got != 3<<30 {
		t.Errorf("after the GPU came back: used %d, want %d", got, uint64(3<<30))
	}
	mustSample(t, p) // and it stays found
}

func TestProcessesRefreshOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		srv.Devices[0].addProc(100, 10<<30)
		srv.Devices[5].addProc(200, 20<<30)
		srv.Devices[5].addProc(201, 1<<30)
		p := mustOpen(t, Options{Lib: srv, ProcessInterval: time.Second})
		calls := func() int { return len(srv.Devices[0].GetComputeRunningProcessesCalls()) }

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

		srv.Devices[0].Procs = nil // the process ends; the cache still shows it
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
	for _, d := range srv.Devices {
		d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			return nil, gonvml.ERROR_NOT_SUPPORTED
		}
	}
	srv.Devices[0].GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
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
	d := srv.Devices[0]
	ok := d.GetComputeRunningProcessesFunc
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		return nil, gonvml.ERROR_GPU_IS_LOST
	}
	p := mustOpen(t, Options{Lib: srv, ProcessInterval: time.Hour})
	if _, err := p.Sample(context.Background()); !errors.Is(err, gpu.ErrGPULost) {
		t.Fatalf("Sample: %v, want ErrGPULost", err)
	}
	d.GetComputeRunningProcessesFunc = ok
	if s := mustSample(t, p); s.ProcessesAt.IsZero() {
		t.Error("the failed refresh was not retried on the next Sample")
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
		srv.Devices[4].GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
			if hang {
				<-release
			}
			return gonvml.Memory_v2{Total: h200Total, Free: h200Total}, gonvml.SUCCESS
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
