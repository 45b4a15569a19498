//go:build cgo

package nvml

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuguard/gpuguard/gpu"
)

// go-nvml's mocks implement no event calls (EventSetCreate, Wait,
// RegisterEvents, GetSupportedEventTypes panic "method is nil"). fakeSet
// fills them in: Wait hands out the events the test queues, and answers
// ERROR_TIMEOUT when its timeout passes without one, as the driver does;
// wait, when set, replaces it.
type fakeSet struct {
	*mock.EventSet
	queue chan gonvml.EventData

	mu         sync.Mutex
	wait       func(ms uint32) (gonvml.EventData, gonvml.Return)
	registered map[string]uint64 // GPU UUID -> event mask
	freed      bool
}

// withEvents gives srv an event set; every GPU supports supported.
func withEvents(srv *server.Server, supported uint64) *fakeSet {
	f := &fakeSet{queue: make(chan gonvml.EventData, 16), registered: map[string]uint64{}}
	f.EventSet = &mock.EventSet{
		WaitFunc: func(ms uint32) (gonvml.EventData, gonvml.Return) {
			f.mu.Lock()
			w := f.wait
			f.mu.Unlock()
			if w != nil {
				return w(ms)
			}
			select {
			case ev := <-f.queue:
				return ev, gonvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() gonvml.Return {
			f.mu.Lock()
			f.freed = true
			f.mu.Unlock()
			return gonvml.SUCCESS
		},
	}
	srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return f, gonvml.SUCCESS }
	for i := range srv.Devices {
		d := dev(srv, i)
		d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return supported, gonvml.SUCCESS }
		d.RegisterEventsFunc = func(mask uint64, set gonvml.EventSet) gonvml.Return {
			f.mu.Lock()
			f.registered[d.UUID] |= mask
			f.mu.Unlock()
			return gonvml.SUCCESS
		}
	}
	return f
}

func (f *fakeSet) setWait(w func(ms uint32) (gonvml.EventData, gonvml.Return)) {
	f.mu.Lock()
	f.wait = w
	f.mu.Unlock()
}

func (f *fakeSet) isFreed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.freed
}

// xidOn is an Xid event on d for the whole GPU.
func xidOn(d gonvml.Device, xid uint64) gonvml.EventData {
	return gonvml.EventData{Device: d, EventType: gonvml.EventTypeXidCriticalError, EventData: xid,
		GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
}

// received returns the faults delivered once every goroutine has settled.
func received(c <-chan gpu.Fault) []gpu.Fault {
	synctest.Wait()
	var out []gpu.Fault
	for {
		select {
		case f := <-c:
			f.Time = time.Time{}
			out = append(out, f)
		default:
			return out
		}
	}
}

// closeProbe closes p and then lets a Wait in flight run out its timeout,
// as the driver's does: Close does not wait for it (see probe.Close), and
// the event goroutine ends and frees the set when it returns.
func closeProbe(t *testing.T, p *probe) {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	time.Sleep(p.eventTimeout)
	synctest.Wait()
}

// logs collects Logf lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logs) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestEvents: critical Xids and double-bit ECC errors on a watched GPU
// arrive as faults with its UUID and index; events of other types and of
// GPUs not watched do not. Each watched GPU is registered for what it
// supports of the two.
func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		set := withEvents(srv, gonvml.EventTypeXidCriticalError|gonvml.EventTypeDoubleBitEccError|gonvml.EventTypePState)
		dev(srv, 3).GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return gonvml.EventTypeXidCriticalError, gonvml.SUCCESS }
		p := mustOpen(t, Options{Lib: srv, Devices: []string{"2", "3"}})
		faults := p.Faults()
		u := uuids(srv)
		set.queue <- xidOn(dev(srv, 2), 79)
		set.queue <- xidOn(dev(srv, 5), 79) // not watched
		set.queue <- gonvml.EventData{Device: dev(srv, 3), EventType: gonvml.EventTypeDoubleBitEccError}
		set.queue <- gonvml.EventData{Device: dev(srv, 3), EventType: gonvml.EventTypePState}
		set.queue <- xidOn(dev(srv, 3), 13)
		want := []gpu.Fault{{UUID: u[2], Index: 2, Xid: 79}, {UUID: u[3], Index: 3, Xid: 48}, {UUID: u[3], Index: 3, Xid: 13}}
		if got := received(faults); !reflect.DeepEqual(got, want) {
			t.Errorf("faults %+v, want %+v", got, want)
		}
		wantReg := map[string]uint64{u[2]: faultEvents, u[3]: gonvml.EventTypeXidCriticalError}
		if !reflect.DeepEqual(set.registered, wantReg) {
			t.Errorf("registered %v, want %v", set.registered, wantReg)
		}
		closeProbe(t, p)
		if !set.isFreed() {
			t.Error("the event set was not freed")
		}
	})
}

// TestEventsMIG: NVML reports events per whole GPU; one reaches every
// watched MIG instance on that GPU, unless it names an instance.
func TestEventsMIG(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, migs := h200Split()
		set := withEvents(srv, faultEvents)
		p := mustOpen(t, Options{Lib: srv, Devices: []string{migs[0].UUID, migs[1].UUID}})
		faults := p.Faults()
		set.queue <- xidOn(dev(srv, 1), 79)
		ev := xidOn(dev(srv, 1), 94)
		ev.GpuInstanceId, ev.ComputeInstanceId = 9, 0
		set.queue <- ev
		want := []gpu.Fault{{UUID: migs[0].UUID, Index: 8, Xid: 79}, {UUID: migs[1].UUID, Index: 9, Xid: 79},
			{UUID: migs[1].UUID, Index: 9, Xid: 94}}
		if got := received(faults); !reflect.DeepEqual(got, want) {
			t.Errorf("faults %+v, want %+v", got, want)
		}
		if len(set.registered) != 1 || set.registered[uuids(srv)[1]] == 0 {
			t.Errorf("registered %v, want the parent GPU once", set.registered)
		}
		closeProbe(t, p)
	})
}

// TestEventsIdle: while nothing happens the goroutine wakes once per
// timeout (12 waits a minute at 5s) and no more. Close does not wait for
// the Wait in flight (gpuguard's exit would wait up to a timeout), and
// leaves NVML loaded for it: the set is freed when the Wait returns.
func TestEventsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		set := withEvents(srv, faultEvents)
		p := mustOpen(t, Options{Lib: srv})
		p.Faults()
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if n := len(set.WaitCalls()); n != 12 {
			t.Errorf("%d waits in a minute, want 12 (one per %s)", n, DefaultEventTimeout)
		}
		t0 := time.Now()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 0 {
			t.Errorf("Close took %s: it waited for the Wait in flight", d)
		}
		if n := len(srv.ShutdownCalls()); n != 0 {
			t.Errorf("NVML shut down %d times with a Wait in the driver", n)
		}
		time.Sleep(DefaultEventTimeout)
		synctest.Wait()
		if !set.isFreed() {
			t.Error("the set was not freed once the Wait returned")
		}
		if n := len(set.WaitCalls()); n != 12 {
			t.Errorf("%d waits, want 12: none after Close", n)
		}
	})
}

// TestEventsWaitErrors: a Wait that fails at once does not spin (one try a
// timeout), is logged once, and the events after it recovers arrive.
func TestEventsWaitErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		set := withEvents(srv, faultEvents)
		set.setWait(func(uint32) (gonvml.EventData, gonvml.Return) { return gonvml.EventData{}, gonvml.ERROR_UNKNOWN })
		var l logs
		p := mustOpen(t, Options{Lib: srv, Devices: []string{"0"}, Logf: l.logf})
		faults := p.Faults()
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if n := len(set.WaitCalls()); n > 12 {
			t.Errorf("%d failing waits in a minute: spinning", n)
		}
		if c := strings.Count(l.text(), "ERROR_UNKNOWN"); c != 1 {
			t.Errorf("the failure was logged %d times, want once:\n%s", c, l.text())
		}
		set.setWait(nil)
		set.queue <- xidOn(dev(srv, 0), 79)
		time.Sleep(DefaultEventTimeout)
		if got := received(faults); len(got) != 1 || got[0].Xid != 79 {
			t.Errorf("after recovery: %+v, want Xid 79", got)
		}
		closeProbe(t, p)
	})
}

// TestEventsWaitBlocks: a Wait stuck in the driver (ignoring its timeout)
// neither blocks Close nor leaks: NVML is not shut down under it, and the
// goroutine ends, freeing the set, when the Wait returns.
func TestEventsWaitBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		set := withEvents(srv, faultEvents)
		release := make(chan struct{})
		set.setWait(func(uint32) (gonvml.EventData, gonvml.Return) {
			<-release
			return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
		})
		p := mustOpen(t, Options{Lib: srv})
		p.Faults()
		synctest.Wait()
		t0 := time.Now()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 0 {
			t.Errorf("Close took %s with a hung Wait", d)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if set.isFreed() {
			t.Error("the set was freed while the Wait was still inside the driver")
		}
		close(release)
		synctest.Wait()
		if !set.isFreed() {
			t.Error("the set was not freed once the Wait returned")
		}
		if n := len(srv.ShutdownCalls()); n != 0 {
			t.Errorf("NVML shut down %d times with a Wait in the driver", n)
		}
	})
}

// TestEventsOff: a GPU that supports neither event type, or an event set
// that cannot be created, means no goroutine and no Wait, said in the log;
// a probe whose Faults is never called creates no event set at all.
func TestEventsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newH200()
		set := withEvents(srv, gonvml.EventTypePState)
		var l logs
		p := mustOpen(t, Options{Lib: srv, Devices: []string{"0"}, Logf: l.logf})
		p.Faults()
		time.Sleep(time.Minute)
		if n := len(set.WaitCalls()); n != 0 || !set.isFreed() || !strings.Contains(l.text(), "neither Xid nor ECC") {
			t.Errorf("%d waits, freed %v, log %q", n, set.isFreed(), l.text())
		}
		p.Close()

		srv = newH200()
		withEvents(srv, faultEvents)
		srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return nil, gonvml.ERROR_NOT_SUPPORTED }
		l = logs{}
		p = mustOpen(t, Options{Lib: srv, Logf: l.logf})
		p.Faults()
		if !strings.Contains(l.text(), "fault events are off") {
			t.Errorf("log %q", l.text())
		}
		p.Close()

		srv = newH200()
		withEvents(srv, faultEvents)
		p = mustOpen(t, Options{Lib: srv})
		mustSample(t, p)
		p.Close()
		if n := len(srv.EventSetCreateCalls()); n != 0 {
			t.Errorf("a probe only sampled created %d event sets", n)
		}
	})
}
