package tenants

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/admission"
)

// clock is a wall clock the test moves; every coordinator of a test shares it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// world is one runtime dir and its clock.
type world struct {
	t     *testing.T
	dir   string
	clock *clock
}

func newWorld(t *testing.T) *world {
	// Socket paths are limited to 108 bytes: keep the dir short.
	dir, err := os.MkdirTemp("", "gt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &world{t: t, dir: dir, clock: newClock()}
}

func (w *world) coordinator(name string) *Coordinator {
	return New(Options{RuntimeDir: w.dir, Name: name, Now: w.clock.Now, PeerTimeout: 200 * time.Millisecond})
}

// fakeTenant is an instance with a real control socket whose supervisor
// is a few fields: it executes tenant_step as the supervisor does (claim
// younger than ClaimTTL, able to step, then Confirm) and records what it
// executed and noted.
type fakeTenant struct {
	w     *world
	coord *Coordinator

	mu       sync.Mutex
	info     api.TenantInfo
	executed []api.TenantStep
	noted    []api.TenantDecision
	refuse   error
	// hang, when set, makes tenant_step block (after confirming when
	// confirmFirst) until the connection's context ends or release closes.
	hang         bool
	confirmFirst bool
	release      chan struct{}
	// slept are the tenant_sleep asks it accepted; sleepAfter is how long
	// it then shows itself stepping before it is asleep.
	slept      []api.TenantSleep
	sleepAfter time.Duration
}

// tenant starts a fake tenant of gpuA: device scope, running, level 0 of
// levels.
func (w *world) tenant(name string, prio, levels int, used uint64) *fakeTenant {
	w.t.Helper()
	f := &fakeTenant{w: w, coord: w.coordinator(name), release: make(chan struct{}),
		info: api.TenantInfo{Name: name, PID: os.Getpid(), Priority: prio, Scope: "device", State: api.StateRunning,
			Levels: levels, GPUs: []api.TenantGPU{{UUID: gpuA, UsedBytes: used}}, GraceSeconds: 3600}}
	srv, err := control.Listen(w.dir, name)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		srv.Serve(ctx, f)
		close(done)
	}()
	w.t.Cleanup(func() {
		f.unhang()
		cancel()
		srv.Close()
		<-done
		f.coord.Close()
	})
	f.publish()
	return f
}

// publish writes the tenant's info for the others, as its supervisor
// would after each change.
func (f *fakeTenant) publish() {
	f.w.t.Helper()
	if err := f.coord.pub.writeInfo(f.self()); err != nil {
		f.w.t.Fatal(err)
	}
}

func (f *fakeTenant) set(mod func(*api.TenantInfo)) {
	f.mu.Lock()
	mod(&f.info)
	f.mu.Unlock()
	f.publish()
}

func (f *fakeTenant) unhang() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

func (f *fakeTenant) steps() []api.TenantStep {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.TenantStep(nil), f.executed...)
}

func (f *fakeTenant) notes() []api.TenantDecision {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.TenantDecision(nil), f.noted...)
}

// self is the Proposal.Self of this tenant.
func (f *fakeTenant) self() api.TenantInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.info
}

func (f *fakeTenant) TenantInfo() api.TenantInfo { return f.self() }

// execute is what the supervisor's loop does with a claim for it.
func (f *fakeTenant) execute(st api.TenantStep) (api.TenantDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return api.TenantDecision{}, f.refuse
	}
	if age := f.w.clock.Now().Sub(time.Unix(0, st.At)); age >= ClaimTTL {
		return api.TenantDecision{}, fmt.Errorf("claim %d is %v old", st.Seq, age)
	}
	if IsDown(st.Kind) && f.info.Level >= f.info.Levels-1 || !IsDown(st.Kind) && f.info.Level == 0 {
		return api.TenantDecision{}, errors.New("cannot step")
	}
	d, err := f.coord.Confirm(st.GPU, st.Seq, time.Duration(f.info.GraceSeconds*float64(time.Second)))
	if err != nil {
		return d, err
	}
	if IsDown(st.Kind) {
		f.info.Level++
	} else {
		f.info.Level--
	}
	f.executed = append(f.executed, st)
	d.Kind = st.Kind
	if err := f.coord.pub.writeInfo(f.info); err != nil {
		return d, err
	}
	return d, nil
}

func (f *fakeTenant) TenantStep(ctx context.Context, st api.TenantStep) (api.TenantDecision, error) {
	f.mu.Lock()
	hang, first := f.hang, f.confirmFirst
	f.mu.Unlock()
	if hang && first {
		f.execute(st)
	}
	if hang {
		return api.TenantDecision{}, f.hangUp(ctx)
	}
	return f.execute(st)
}

// hangUp blocks as a hung tenant does, until the connection's context
// ends or release closes.
func (f *fakeTenant) hangUp(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-f.release:
	}
	return errors.New("released")
}

func (f *fakeTenant) TenantDecision(_ context.Context, d api.TenantDecision) error {
	f.mu.Lock()
	f.noted = append(f.noted, d)
	f.mu.Unlock()
	return nil
}

func (f *fakeTenant) Ready(context.Context) error { return nil }

// TenantSleep accepts an ask to sleep as the supervisor's core does: only
// when its room facts make it a candidate for that asker (the asker's own
// ranking read them a moment before); it then shows itself stepping for
// sleepAfter, then asleep. hang blocks it as tenant_step.
func (f *fakeTenant) TenantSleep(ctx context.Context, ts api.TenantSleep) error {
	f.mu.Lock()
	hang := f.hang
	f.mu.Unlock()
	if hang {
		return f.hangUp(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
	r := f.info.Room
	if r == nil || !r.Serving || r.Busy {
		return errors.New("not a candidate")
	}
	f.slept = append(f.slept, ts)
	f.info.State = api.StateStepping
	asleep := func() { // f.mu held
		f.info.State = api.StateAsleep
		room := *f.info.Room
		room.Serving, room.For = false, ts.For
		f.info.Room = &room
	}
	if f.sleepAfter <= 0 {
		asleep()
		return nil
	}
	time.AfterFunc(f.sleepAfter, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		asleep()
	})
	return nil
}

// sleeps are the asks to sleep it accepted.
func (f *fakeTenant) sleeps() []api.TenantSleep {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.TenantSleep(nil), f.slept...)
}

// The rest of control.Backend is not used here.
func (f *fakeTenant) Status() api.Status                           { return api.Status{Name: f.info.Name} }
func (f *fakeTenant) Step(context.Context, string) (string, error) { return "", errors.New("no") }
func (f *fakeTenant) MarkOOM(string)                               {}
func (f *fakeTenant) Release(context.Context, string) error        { return nil }
func (f *fakeTenant) Reserve(context.Context, admission.Request) (admission.Decision, error) {
	return admission.Decision{}, errors.New("no")
}

// propose is Decide for this tenant with its own info.
func (f *fakeTenant) propose(kind string) Outcome {
	return f.coord.Decide(context.Background(), Proposal{GPU: gpuA, Kind: kind, Watermark: 0.95, Self: f.self()})
}

// stopped is a socket whose instance was SIGSTOPped: connections are
// accepted (the kernel does that) and never answered.
func (w *world) stopped(name string) {
	w.t.Helper()
	ln, err := net.Listen("unix", filepath.Join(w.dir, name+".sock"))
	if err != nil {
		w.t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	w.t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
}

// publishedBy writes the info a tenant of gpuA named name published;
// holding says whether its live lock stays held (false: it was SIGKILLed
// after publishing).
func (w *world) publishedBy(name string, prio int, holding bool) {
	w.t.Helper()
	c := w.coordinator(name)
	info := api.TenantInfo{Name: name, Priority: prio, Scope: "device", State: api.StateRunning, Levels: 3,
		GPUs: []api.TenantGPU{{UUID: gpuA}}}
	if err := c.pub.writeInfo(info); err != nil {
		w.t.Fatal(err)
	}
	if !holding {
		c.live.Close() // as the kernel does when it dies; its files stay
		c.live = nil
	}
	w.t.Cleanup(func() { c.Close() })
}

// dead is the socket file a SIGKILLed instance leaves: it refuses.
func (w *world) dead(name string) {
	w.t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(w.dir, name+".sock"), Net: "unix"})
	if err != nil {
		w.t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}
