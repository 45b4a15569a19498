package supervisor

import (
	"context"
	"errors"
	"os"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

const gib = uint64(1 << 30)

// fakeProbe is a GPU whose usage the test sets.
type fakeProbe struct {
	mu    sync.Mutex
	devs  []gpu.Device
	procs []gpu.Process
	err   error
	calls int
}

func newFakeProbe(total uint64) *fakeProbe {
	return &fakeProbe{devs: []gpu.Device{{Index: 0, UUID: "GPU-fake-0", Name: "Fake", Total: total}}}
}

func (p *fakeProbe) Sample(ctx context.Context) (gpu.Sample, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.err != nil {
		return gpu.Sample{}, p.err
	}
	s := gpu.Sample{Time: time.Now(), Devices: append([]gpu.Device(nil), p.devs...),
		Processes: append([]gpu.Process(nil), p.procs...)}
	if p.procs != nil {
		s.ProcessesAt = s.Time
	}
	return s, nil
}

func (p *fakeProbe) Close() error { return nil }

func (p *fakeProbe) setUsed(used uint64) {
	p.mu.Lock()
	p.devs[0].Used = used
	p.mu.Unlock()
}

func (p *fakeProbe) setErr(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

func (p *fakeProbe) setProcs(procs []gpu.Process) {
	p.mu.Lock()
	p.procs = procs
	p.mu.Unlock()
}

// fakeChild is a child process whose end the test decides.
type fakeChild struct {
	pid  int
	spec LaunchSpec

	mu       sync.Mutex
	signals  []syscall.Signal
	killed   bool
	exit     Exit
	done     chan struct{}
	onSignal func(c *fakeChild, sig syscall.Signal)
	once     sync.Once
	// noHandler: the child does not catch or ignore the notify signal
	// (yet); maskErr: whether it does cannot be read.
	noHandler bool
	maskErr   error
}

func (c *fakeChild) Catches(sig syscall.Signal) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maskErr != nil {
		return false, c.maskErr
	}
	return !c.noHandler, nil
}

// setHandler says whether the child catches the notify signal from now on.
func (c *fakeChild) setHandler(installed bool) {
	c.mu.Lock()
	c.noHandler = !installed
	c.mu.Unlock()
}

func (c *fakeChild) PID() int { return c.pid }

func (c *fakeChild) Signal(sig syscall.Signal) error {
	c.mu.Lock()
	c.signals = append(c.signals, sig)
	h := c.onSignal
	c.mu.Unlock()
	if h != nil {
		h(c, sig)
	}
	return nil
}

func (c *fakeChild) Kill() error {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	c.end(Exit{Code: -1, Signal: syscall.SIGKILL})
	return nil
}

func (c *fakeChild) Done() <-chan struct{} { return c.done }
func (c *fakeChild) Exit() Exit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exit
}

func (c *fakeChild) end(e Exit) {
	c.once.Do(func() {
		c.mu.Lock()
		c.exit = e
		c.mu.Unlock()
		close(c.done)
	})
}

func (c *fakeChild) setOnSignal(f func(c *fakeChild, sig syscall.Signal)) {
	c.mu.Lock()
	c.onSignal = f
	c.mu.Unlock()
}

func (c *fakeChild) gotSignals() []syscall.Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]syscall.Signal(nil), c.signals...)
}

func (c *fakeChild) env(key string) string {
	for _, kv := range c.spec.Env {
		if len(kv) > len(key) && kv[:len(key)] == key && kv[len(key)] == '=' {
			return kv[len(key)+1:]
		}
	}
	return ""
}

// fakeLauncher hands every launched child to the test.
type fakeLauncher struct {
	mu       sync.Mutex
	next     int
	launched chan *fakeChild
	fail     error
	// noHandler: children start without a handler for the notify signal.
	noHandler bool
	// badCommand is what Check says of every command (nil: it can run).
	badCommand error
}

func (l *fakeLauncher) Check(spec LaunchSpec) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.badCommand
}

func newFakeLauncher() *fakeLauncher {
	return &fakeLauncher{next: 1000, launched: make(chan *fakeChild, 16)}
}

func (l *fakeLauncher) Launch(spec LaunchSpec) (Child, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	l.next++
	c := &fakeChild{pid: l.next, spec: spec, done: make(chan struct{}), noHandler: l.noHandler}
	l.launched <- c
	return c, nil
}

// recorder keeps every event, state file write, publish and rotation.
type recorder struct {
	mu        sync.Mutex
	events    []api.Event
	states    []api.ProfileState
	published []api.ProfileState
	rotations int
	ops       []string // "state", "signal", "publish" in the order they happened
	stateErr  error    // set: every state file write fails so (a full disk)
}

func (r *recorder) failStates(err error) {
	r.mu.Lock()
	r.stateErr = err
	r.mu.Unlock()
}

func (r *recorder) op(name string) {
	r.mu.Lock()
	r.ops = append(r.ops, name)
	r.mu.Unlock()
}

func (r *recorder) gotOps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...)
}

func (r *recorder) Observe(ev api.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) Publish(st api.ProfileState) {
	r.mu.Lock()
	r.published = append(r.published, st)
	r.ops = append(r.ops, "publish")
	r.mu.Unlock()
}

func (r *recorder) writeState(path string, st api.ProfileState) error {
	r.mu.Lock()
	if r.stateErr != nil {
		defer r.mu.Unlock()
		return r.stateErr
	}
	r.states = append(r.states, st)
	r.ops = append(r.ops, "state")
	r.mu.Unlock()
	return nil
}

func (r *recorder) rotate(path string, keep int) error {
	r.mu.Lock()
	r.rotations++
	r.mu.Unlock()
	return nil
}

func (r *recorder) named(event string) []api.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []api.Event
	for _, ev := range r.events {
		if ev.Event == event {
			out = append(out, ev)
		}
	}
	return out
}

func (r *recorder) lastState() api.ProfileState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states[len(r.states)-1]
}

// testPolicy is a three-profile ladder with short timers.
func testPolicy() *policy.Policy {
	return &policy.Policy{
		Name:    "t",
		Command: []string{"server", "--batch", "${MAX_BATCH}"},
		Watch:   policy.Watch{Backend: "sim", Interval: 100 * time.Millisecond, Scope: policy.ScopeDevice},
		Watermark: policy.Watermark{High: 0.90, Critical: 0.97, Low: 0.70,
			Sustain: time.Second, Grace: 5 * time.Second},
		Restart: policy.Restart{OnCrash: true, Backoff: time.Second, BackoffMax: 4 * time.Second,
			ResetAfter: time.Minute, MaxRestarts: 5, Window: 10 * time.Minute, StopSignal: syscall.SIGTERM,
			StopTimeout: 3 * time.Second, ReleaseTimeout: 5 * time.Second, WhenFull: policy.WhenFullWait},
		Notify:     policy.Notify{Signal: syscall.SIGUSR1},
		OOM:        policy.OOM{Patterns: []*regexp.Regexp{regexp.MustCompile(`CUDA out of memory`)}, ExitCodes: []int{42}, ScanStderr: true},
		Checkpoint: policy.Checkpoint{Keep: 3},
		Profiles: []policy.Profile{
			{Name: "fp16", Needs: 10 * gib, Env: map[string]string{"MAX_BATCH": "32"}},
			{Name: "int8", Needs: 6 * gib, Live: true, Env: map[string]string{"MAX_BATCH": "16"}},
			{Name: "int4", Live: true, Env: map[string]string{"MAX_BATCH": "8"}},
		},
	}
}

// harness runs a Supervisor in the test's synctest bubble.
type harness struct {
	t        *testing.T
	sup      *Supervisor
	probe    *fakeProbe
	launcher *fakeLauncher
	rec      *recorder
	signals  chan syscall.Signal
	cancel   context.CancelFunc
	done     chan struct{}
	code     int
	err      error
}

func startHarness(t *testing.T, pol *policy.Policy, mod func(*Config, *Deps)) *harness {
	t.Helper()
	h := &harness{t: t, probe: newFakeProbe(16 * gib), launcher: newFakeLauncher(), rec: &recorder{},
		signals: make(chan syscall.Signal, 4), done: make(chan struct{})}
	cfg := Config{Name: "t", Policy: pol, Command: pol.Command, CheckpointPath: "/state/checkpoint",
		StatePath: "/state/state.json", SocketPath: "/run/t.sock", BaseEnv: []string{"PATH=/bin", "MAX_BATCH=1"}}
	deps := Deps{Probe: h.probe, Launcher: h.launcher, WriteState: h.rec.writeState, RotateCheckpoint: h.rec.rotate,
		Observers: []Observer{h.rec}, Publisher: h.rec, Logf: t.Logf}
	if mod != nil {
		mod(&cfg, &deps)
	}
	sup, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	h.sup = sup
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	sigs := make(chan os.Signal, 4)
	go func() {
		for s := range h.signals {
			sigs <- s
		}
	}()
	go func() {
		h.code, h.err = sup.Run(ctx, sigs)
		close(h.done)
	}()
	// Run logs through t until it returns, so the test waits for it:
	// a log line after the test has ended is a race in the testing package.
	t.Cleanup(func() {
		cancel()
		<-h.done
		close(h.signals)
	})
	return h
}

// child waits for the next launched child.
func (h *harness) child() *fakeChild {
	h.t.Helper()
	select {
	case c := <-h.launcher.launched:
		return c
	case <-h.done:
		h.t.Fatalf("supervisor ended (code %d, err %v) instead of launching a child", h.code, h.err)
	}
	return nil
}

// wait waits for Run to return and gives its result.
func (h *harness) wait() (int, error) {
	<-h.done
	return h.code, h.err
}

func (h *harness) noLaunch() {
	h.t.Helper()
	select {
	case c := <-h.launcher.launched:
		h.t.Fatalf("unexpected launch of a child (level %s)", c.env("GPUGUARD_PROFILE"))
	default:
	}
}

var errLost = errors.Join(gpu.ErrGPULost, errors.New("GPU 0: ERROR_GPU_IS_LOST"))
