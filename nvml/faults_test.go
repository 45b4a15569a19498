//go:build cgo

package nvml

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor"
)

// faultyGPU replaces a mock device's memory query with one whose answer
// the test sets from any goroutine: healthy (reporting used), an error
// code, or a hang until released.
type faultyGPU struct {
	mu    sync.Mutex
	used  uint64
	total uint64
	ret   gonvml.Return
	hang  chan struct{}
}

func inject(d *server.Device) *faultyGPU {
	f := &faultyGPU{total: d.MemoryInfo.Total, used: d.MemoryInfo.Used, ret: gonvml.SUCCESS}
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		f.mu.Lock()
		used, total, ret, hang := f.used, f.total, f.ret, f.hang
		f.mu.Unlock()
		if hang != nil {
			<-hang
		}
		if ret != gonvml.SUCCESS {
			return gonvml.Memory_v2{}, ret
		}
		return gonvml.Memory_v2{Total: total, Used: used, Free: total - used}, gonvml.SUCCESS
	}
	return f
}

func (f *faultyGPU) set(ret gonvml.Return, hang chan struct{}) {
	f.mu.Lock()
	f.ret, f.hang = ret, hang
	f.mu.Unlock()
}

func (f *faultyGPU) setUsed(used uint64) {
	f.mu.Lock()
	f.used = used
	f.mu.Unlock()
}

// TestFlappingErrors: a GPU whose memory query fails on every other call
// with a transient error fails those samples only; it is not marked lost
// (no UUID lookups) and the calls in between read it normally. A GPU that
// flaps between lost and back is looked up again each time and found.
func TestFlappingErrors(t *testing.T) {
	srv := newH200()
	f := inject(dev(srv, 3))
	f.setUsed(5 << 30)
	p := mustOpen(t, Options{Lib: srv})
	for _, tc := range []struct {
		ret     gonvml.Return
		lost    bool
		lookups int
	}{
		{gonvml.ERROR_TIMEOUT, false, 0},
		{gonvml.ERROR_UNKNOWN, true, 10},
		{gonvml.ERROR_GPU_IS_LOST, true, 20},
	} {
		for range 10 {
			f.set(tc.ret, nil)
			_, err := p.Sample(context.Background())
			if err == nil || !errors.Is(err, tc.ret) || errors.Is(err, gpu.ErrGPULost) != tc.lost {
				t.Fatalf("%v: Sample error %v, want it wrapped (lost: %v)", tc.ret, err, tc.lost)
			}
			if !strings.Contains(err.Error(), "GPU 3") {
				t.Errorf("error %q does not name GPU 3", err)
			}
			f.set(gonvml.SUCCESS, nil)
			if got := mustSample(t, p).Devices[3].Used; got != 5<<30 {
				t.Fatalf("%v: between failures used %d, want %d", tc.ret, got, uint64(5<<30))
			}
		}
		if n := len(srv.DeviceGetHandleByUUIDCalls()); n != tc.lookups {
			t.Errorf("after flapping with %v: %d UUID lookups, want %d", tc.ret, n, tc.lookups)
		}
	}
}

// hungSample opens a probe on a mock H200 whose GPU i answers one Sample,
// then starts a second that gets stuck in the driver (inside a synctest
// bubble: it returns once that call is blocked). release lets the call
// return, and returns the stuck Sample's error.
func hungSample(t *testing.T, i int) (srv *server.Server, d *server.Device, p *probe, release func() error) {
	t.Helper()
	srv = newH200()
	d = dev(srv, i)
	f := inject(d)
	p = mustOpen(t, Options{Lib: srv})
	mustSample(t, p)
	hang := make(chan struct{})
	f.set(gonvml.SUCCESS, hang)
	stuck := make(chan error, 1)
	go func() {
		_, err := p.Sample(context.Background())
		stuck <- err
	}()
	synctest.Wait()
	return srv, d, p, func() error {
		f.set(gonvml.SUCCESS, nil)
		close(hang)
		return <-stuck
	}
}

// TestHungDriverNeverPilesUp: while one call is stuck in the driver, every
// later Sample gives up at its own deadline without entering the driver,
// so callers never pile up behind it; once the call returns, sampling
// goes on.
func TestHungDriverNeverPilesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, d, p, release := hungSample(t, 6)
		before := len(d.GetMemoryInfo_v2Calls())
		for i := range 100 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			_, err := p.Sample(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Sample %d behind a hung call: %v, want DeadlineExceeded", i, err)
			}
		}
		if n := len(d.GetMemoryInfo_v2Calls()); n != before {
			t.Fatalf("%d more driver calls behind the hung one", n-before)
		}
		if err := release(); err != nil {
			t.Fatalf("the hung call, released: %v", err)
		}
		mustSample(t, p)
	})
}

// TestCloseWithHungSample: gpuguard closes its probe on the way out, so a
// Sample stuck in the driver must not hold Close (and the exit) for ever:
// Close gives up after closeWait with an error and does not shut NVML
// down under the call. The call, once released, ends normally, and no
// Sample enters the driver after Close.
func TestCloseWithHungSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, d, p, release := hungSample(t, 2)
		t0 := time.Now()
		err := p.Close()
		if err == nil || !strings.Contains(err.Error(), "inside the driver") {
			t.Errorf("Close with a hung Sample: %v, want an error saying a call is inside the driver", err)
		}
		if el := time.Since(t0); el != closeWait {
			t.Errorf("Close returned after %s, want %s", el, closeWait)
		}
		if n := len(srv.ShutdownCalls()); n != 0 {
			t.Errorf("NVML shut down %d times under a call in the driver", n)
		}
		if err := release(); err != nil {
			t.Errorf("the hung call, released: %v", err)
		}
		calls := len(d.GetMemoryInfo_v2Calls())
		if _, err := p.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("Sample after Close: %v, want probe is closed", err)
		}
		if n := len(d.GetMemoryInfo_v2Calls()); n != calls {
			t.Errorf("a Sample after Close made %d driver calls", n-calls)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// The supervisor on the mock: its loop with this package's probe over
// mock/dgxh200, and a fake child.

type fakeChild struct {
	pid  int
	mu   sync.Mutex
	sigs []syscall.Signal
	done chan struct{}
	once sync.Once
}

func (c *fakeChild) PID() int { return c.pid }
func (c *fakeChild) Signal(s syscall.Signal) error {
	c.mu.Lock()
	c.sigs = append(c.sigs, s)
	c.mu.Unlock()
	return nil
}
func (c *fakeChild) Kill() error           { c.end(); return nil }
func (c *fakeChild) Done() <-chan struct{} { return c.done }
func (c *fakeChild) Exit() supervisor.Exit { return supervisor.Exit{} }
func (c *fakeChild) end()                  { c.once.Do(func() { close(c.done) }) }
func (c *fakeChild) signals() []syscall.Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]syscall.Signal(nil), c.sigs...)
}

type launcher struct{ children chan *fakeChild }

func (l launcher) Launch(supervisor.LaunchSpec) (supervisor.Child, error) {
	c := &fakeChild{pid: 4242, done: make(chan struct{})}
	l.children <- c
	return c, nil
}

type journal struct {
	mu     sync.Mutex
	events []api.Event
}

func (j *journal) Observe(ev api.Event) { j.mu.Lock(); j.events = append(j.events, ev); j.mu.Unlock() }
func (j *journal) count(name string) (n int, last api.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, ev := range j.events {
		if ev.Event == name {
			n, last = n+1, ev
		}
	}
	return n, last
}

type meter struct {
	mu   sync.Mutex
	errs int
}

func (m *meter) ObserveProbe(_ time.Duration, err error) {
	if err != nil {
		m.mu.Lock()
		m.errs++
		m.mu.Unlock()
	}
}
func (m *meter) errors() int { m.mu.Lock(); defer m.mu.Unlock(); return m.errs }

// TestSupervisorOnMockH200: GPU 2 of the eight is lost mid-run, then GPU 4
// hangs in the driver. The child keeps running and is never stepped on
// missing data; every fault is journaled and counted; the loop answers a
// manual step while the driver is stuck; once the GPUs answer again, a
// step down needs `sustain` of fresh readings above high.
func TestSupervisorOnMockH200(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		g2, g4 := inject(dev(srv, 2)), inject(dev(srv, 4))
		probe := mustOpen(t, Options{Lib: srv, ProcessInterval: time.Hour})
		pol := policy.Default()
		pol.Watch.Interval = 100 * time.Millisecond
		pol.Watermark.Sustain, pol.Watermark.Grace = time.Second, 5*time.Second
		pol.Profiles = []policy.Profile{
			{Name: "fp16", Live: true, Env: map[string]string{}},
			{Name: "int8", Live: true, Env: map[string]string{}},
			{Name: "int4", Live: true, Env: map[string]string{}},
		}
		l := launcher{children: make(chan *fakeChild, 4)}
		j, m := &journal{}, &meter{}
		sup, err := supervisor.New(supervisor.Config{Name: "h200", Policy: pol, Command: []string{"serve"}},
			supervisor.Deps{Probe: probe, Launcher: l, Meter: m, Observers: []supervisor.Observer{j}, Logf: t.Logf,
				WriteState:       func(string, api.ProfileState) error { return nil },
				RotateCheckpoint: func(string, int) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() {
			code, _ := sup.Run(ctx, nil)
			done <- code
		}()
		c := <-l.children
		sleep := func(d time.Duration) { time.Sleep(d); synctest.Wait() }
		sleep(time.Second)

		total := g2.total
		g2.setUsed(total * 95 / 100) // above high, not yet for `sustain`
		sleep(700 * time.Millisecond)
		g2.set(gonvml.ERROR_GPU_IS_LOST, nil)
		sleep(5 * time.Second)
		if n, ev := j.count(api.EventProbeError); n != 1 || !strings.Contains(ev.Detail, "ERROR_GPU_IS_LOST") {
			t.Fatalf("%d probe_error events (last %+v), want one naming the loss", n, ev)
		}
		if n := m.errors(); n < 45 {
			t.Fatalf("%d probe errors counted in 5s, want about 50", n)
		}
		if n, _ := j.count(api.EventStepDown); n != 0 || len(c.signals()) != 0 {
			t.Fatal("a decision without data")
		}

		g2.set(gonvml.SUCCESS, nil) // back after a reset, still above high
		g4.set(gonvml.SUCCESS, make(chan struct{}))
		sleep(5 * time.Second)
		if n, ev := j.count(api.EventProbeError); n != 2 || !strings.Contains(ev.Detail, "has not returned") {
			t.Fatalf("%d probe_error events (last %+v), want a second for the hung call", n, ev)
		}
		if n, _ := j.count(api.EventStepDown); n != 0 {
			t.Fatal("stepped down on data from before the gap")
		}
		if p, err := sup.Step(context.Background(), "down"); err != nil || p != "int8" {
			t.Fatalf("manual step while the driver is stuck: %q %v", p, err)
		}

		g4.mu.Lock()
		hang := g4.hang
		g4.hang = nil
		g4.mu.Unlock()
		close(hang)
		sleep(5 * time.Second) // grace of the manual step passes; above high since the release
		if n, _ := j.count(api.EventStepDown); n != 2 {
			t.Fatalf("%d step downs, want the manual one and one for `sustain` above high on fresh data", n)
		}
		if st := sup.Status(); st.Profile != "int4" || len(st.GPUs) != 8 {
			t.Fatalf("status %+v", st)
		}
		cancel()
		synctest.Wait()
		c.end()
		if code := <-done; code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
}
