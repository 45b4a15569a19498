package supervisor

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
)

// fakeDoor records what the supervisor tells the front door; its drains
// end when the test says.
type fakeDoor struct {
	mu       sync.Mutex
	calls    []string
	drain    chan struct{}
	short    bool
	ready    bool
	held     int
	inFlight int
	lastEnd  time.Time
	profile  string
	launched []int
}

func newFakeDoor() *fakeDoor { return &fakeDoor{drain: make(chan struct{})} }

func (d *fakeDoor) add(s string) {
	d.mu.Lock()
	d.calls = append(d.calls, s)
	d.mu.Unlock()
}
func (d *fakeDoor) Launched(gen int) {
	d.mu.Lock()
	d.launched = append(d.launched, gen)
	d.mu.Unlock()
	d.add("launched")
}
func (d *fakeDoor) Unready() { d.add("unready") }
func (d *fakeDoor) Drain() <-chan struct{} {
	d.add("drain")
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.drain
}
func (d *fakeDoor) Profile(name string, level, levels int) {
	d.mu.Lock()
	d.profile = name
	d.mu.Unlock()
}
func (d *fakeDoor) Short(short bool) {
	d.mu.Lock()
	d.short = short
	d.mu.Unlock()
}
func (d *fakeDoor) Ready() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.ready }
func (d *fakeDoor) Held() int   { d.mu.Lock(); defer d.mu.Unlock(); return d.held }
func (d *fakeDoor) InFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlight
}
func (d *fakeDoor) LastAnswer() time.Time { d.mu.Lock(); defer d.mu.Unlock(); return d.lastEnd }

// answering sets the requests in flight; their end (n back to 0) is the
// last answer, at the fake clock's now.
func (d *fakeDoor) answering(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n < d.inFlight {
		d.lastEnd = time.Now()
	}
	d.inFlight = n
}

func (d *fakeDoor) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

func (d *fakeDoor) isShort() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.short }

// TestDoorDrainsBeforePlannedRestart: a step into a live = false profile
// first drains the door; the stop signal goes only once the requests in
// flight are done; the next child is announced to the door.
func TestDoorDrainsBeforePlannedRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[1].Live = false
		door := newFakeDoor()
		h := startHarness(t, pol, func(_ *Config, d *Deps) { d.Door = door })
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
			if sig == syscall.SIGTERM {
				c.end(Exit{Code: 0})
			}
		})
		stepped := make(chan string, 1)
		go func() {
			p, err := h.sup.Step(context.Background(), "down")
			if err != nil {
				t.Error(err)
			}
			stepped <- p
		}()
		synctest.Wait()
		if !slices.Contains(door.got(), "drain") {
			t.Fatalf("door calls %v: no drain before the restart", door.got())
		}
		if !door.isShort() {
			t.Error("memory not short while a restart is planned")
		}
		time.Sleep(2 * time.Second) // requests still in flight
		synctest.Wait()
		if sigs := c.gotSignals(); len(sigs) != 0 {
			t.Fatalf("child signalled %v while requests were in flight", sigs)
		}
		close(door.drain)
		c2 := h.child()
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGTERM}) {
			t.Fatalf("first child got %v", sigs)
		}
		if p := <-stepped; p != "int8" {
			t.Fatalf("step reply %q", p)
		}
		synctest.Wait()
		door.mu.Lock()
		launched := append([]int(nil), door.launched...)
		door.mu.Unlock()
		if !slices.Equal(launched, []int{1, 2}) {
			t.Errorf("door told of launches %v, want [1 2]", launched)
		}
		if got := door.got(); !slices.Equal(got, []string{"launched", "drain", "unready", "launched"}) {
			t.Errorf("door calls %v", got)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestDoorDrainBounded: requests that never finish hold the stop for
// stop_timeout, no longer.
func TestDoorDrainBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		door := newFakeDoor()
		h := startHarness(t, testPolicy(), func(_ *Config, d *Deps) { d.Door = door })
		c := h.child()
		start := time.Now()
		h.signals <- syscall.SIGTERM
		synctest.Wait()
		if len(c.gotSignals()) != 0 {
			t.Fatal("stop forwarded before the drain")
		}
		time.Sleep(h.sup.cfg.Policy.Restart.StopTimeout)
		synctest.Wait()
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGTERM}) {
			t.Fatalf("after stop_timeout the child got %v, want SIGTERM once", sigs)
		}
		if took := time.Since(start); took != h.sup.cfg.Policy.Restart.StopTimeout {
			t.Errorf("forwarded after %s", took)
		}
		c.end(Exit{Code: 0})
		if code, _ := h.wait(); code != 0 {
			t.Errorf("code %d", code)
		}
	})
}

// TestDoorHealthy: the first healthy answer of the current launch is the
// `ready` event, ends the start on a shared GPU and sends READY=1 (not the
// launch); a report for another launch is ignored.
func TestDoorHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		door := newFakeDoor()
		n := &fakeNotifier{}
		h := startHarness(t, testPolicy(), func(_ *Config, d *Deps) { d.Door = door; d.Notifier = n })
		c := h.child()
		synctest.Wait()
		if n.count("READY") != 0 {
			t.Fatal("READY=1 at the launch with a front door")
		}
		h.sup.Healthy(7) // not this launch
		synctest.Wait()
		if len(h.rec.named(api.EventReady)) != 0 {
			t.Fatal("a stale report made the child ready")
		}
		time.Sleep(1500 * time.Millisecond)
		h.sup.Healthy(1)
		h.sup.Healthy(1)
		synctest.Wait()
		ev := h.rec.named(api.EventReady)
		if len(ev) != 1 || ev[0].AfterSeconds < 1.5 || ev[0].PID != c.pid {
			t.Fatalf("ready events %+v", ev)
		}
		if n.count("READY") != 1 {
			t.Fatalf("READY=1 sent %d times", n.count("READY"))
		}
		door.mu.Lock()
		door.ready, door.held = true, 4
		door.mu.Unlock()
		if st := h.sup.Status(); !st.Ready || st.Held != 4 {
			t.Errorf("status ready %v held %d, want the door's", st.Ready, st.Held)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestDoorUnreadyOnExit: an OOM exit tells the door the child is gone.
func TestDoorUnreadyOnExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		door := newFakeDoor()
		h := startHarness(t, testPolicy(), func(_ *Config, d *Deps) { d.Door = door })
		c := h.child()
		c.end(Exit{Code: 42})
		c2 := h.child()
		synctest.Wait() // the door hears of a launch after Launch returns
		if got := door.got(); !slices.Equal(got, []string{"launched", "unready", "launched"}) {
			t.Errorf("door calls %v", got)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestDoorShortAboveHigh: memory is short at or above high.
func TestDoorShortAboveHigh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		door := newFakeDoor()
		pol := testPolicy()
		pol.Watermark.Sustain = time.Hour
		h := startHarness(t, pol, func(_ *Config, d *Deps) { d.Door = door })
		c := h.child()
		time.Sleep(time.Second)
		synctest.Wait()
		if door.isShort() {
			t.Fatal("short at 0 used")
		}
		h.probe.setUsed(15 * gib)
		time.Sleep(time.Second)
		synctest.Wait()
		if !door.isShort() {
			t.Fatal("not short above high")
		}
		h.probe.setUsed(gib)
		time.Sleep(time.Second)
		synctest.Wait()
		if door.isShort() {
			t.Fatal("still short below high")
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestReadyWithoutDoor: without a front door, ready is whether a child
// runs, and READY=1 goes at the first launch.
func TestReadyWithoutDoor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &fakeNotifier{}
		h := startHarness(t, testPolicy(), func(_ *Config, d *Deps) { d.Notifier = n })
		c := h.child()
		synctest.Wait()
		if st := h.sup.Status(); !st.Ready || st.Held != 0 {
			t.Errorf("status ready %v held %d", st.Ready, st.Held)
		}
		if n.count("READY") != 1 {
			t.Errorf("READY=1 sent %d times", n.count("READY"))
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestDoorHealthyEndsStart: on a shared GPU, the child's first healthy
// answer ends its start (the next tenant may start), as its own "ready"
// message would.
func TestDoorHealthyEndsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Watch.Settle = 2 * time.Second
		door := newFakeDoor()
		h := startHarness(t, pol, func(c *Config, d *Deps) {
			withCoord(&sharingtest.Coord{})(c, d)
			d.Door = door
		})
		c := h.child()
		h.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: 2 * gib}})
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		if !h.sup.Admission().TenantInfo().Starting {
			t.Fatal("not starting before the health check passed")
		}
		h.sup.Healthy(1)
		synctest.Wait()
		if h.sup.Admission().TenantInfo().Starting {
			t.Fatal("still starting after the first healthy answer")
		}
		c.end(Exit{})
		h.wait()
	})
}
