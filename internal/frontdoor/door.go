package frontdoor

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/deliver"
	"github.com/gpuguard/gpuguard/internal/serve"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor"
)

// Door is the run's [serve] front door, or nothing (every method is safe
// on a nil *Door).
type Door struct {
	door    *serve.Door
	ln      net.Listener
	stopped chan struct{} // closed by Close: Serve returns
	logf    func(string, ...any)
	bodies  BodyTimeouts // kept across reloads
}

// shutdown bounds the door's own shutdown after the child has stopped:
// the stop already drained it, so only held requests remain, and they are
// answered 503 at once.
const shutdown = 2 * time.Second

// Options are the supervisor's callbacks (called only once it runs), the
// door's meter and queue (nil: none), and where the door logs.
type Options struct {
	Status    func() api.Status
	Healthy   func(gen int)
	Requested func(held bool)
	Meter     serve.Meter
	Queue     serve.Queue
	Logf      func(string, ...any)
	// Bodies shortens the bounds on a request body's arrival, for tests
	// (zero: the contract's).
	Bodies BodyTimeouts
}

// BodyTimeouts are the door's bounds on a request body's arrival: no byte
// for Idle, or not all in within Total; zero is the contract's 60 s and
// 10 min.
type BodyTimeouts struct{ Idle, Total time.Duration }

// BodyTimeoutsVar shortens BodyTimeouts for the end-to-end tests, which
// cannot wait 60 s and 10 min: "IDLE,TOTAL" as Go durations, e.g.
// "2s,8s". Not for production: the contract's bounds are fixed.
const BodyTimeoutsVar = "GPUGUARD_DOOR_BODY_TIMEOUTS"

// BodyTimeoutsFromEnv reads BodyTimeoutsVar through getenv; unset is zero.
func BodyTimeoutsFromEnv(getenv func(string) string) (BodyTimeouts, error) {
	v := getenv(BodyTimeoutsVar)
	if v == "" {
		return BodyTimeouts{}, nil
	}
	idle, total, ok := strings.Cut(v, ",")
	i, err1 := time.ParseDuration(idle)
	t, err2 := time.ParseDuration(total)
	if !ok || err1 != nil || err2 != nil || i <= 0 || t <= 0 {
		return BodyTimeouts{}, fmt.Errorf("%s=%q: want IDLE,TOTAL as positive durations, e.g. 2s,8s", BodyTimeoutsVar, v)
	}
	return BodyTimeouts{Idle: i, Total: t}, nil
}

// Open binds [serve] listen, before anything else starts: an address in
// use is an error naming it, with nothing started. Without [serve] listen
// it returns nil.
func Open(s policy.Serve, o Options) (*Door, error) {
	if !s.Enabled() {
		return nil, nil
	}
	ln, err := serve.Listen(s.Listen)
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { o.Logf("front door: "+format, args...) }
	d := serve.New(config(s, o.Bodies), serve.Options{Status: o.Status, OnHealthy: o.Healthy, OnRequest: o.Requested, Meter: o.Meter,
		Queue: o.Queue, Logf: logf})
	return &Door{door: d, ln: ln, stopped: make(chan struct{}), logf: logf, bodies: o.Bodies}, nil
}

// config is [serve] as the door takes it.
func config(s policy.Serve, b BodyTimeouts) serve.Config {
	return serve.Config{Upstream: s.Upstream, Health: s.Health, Hold: s.Hold, MaxHeld: s.MaxHeld,
		Retry: s.Retry, Fallback: s.Fallback, Priority: s.Priority, BodyIdle: b.Idle, BodyTotal: b.Total}
}

// Dep is the door as the supervisor's dependency: a nil interface without
// a front door.
func (f *Door) Dep() supervisor.Door {
	if f == nil {
		return nil
	}
	return f.door
}

// Replayer is the door as the replayer of deferred requests: a nil
// interface without a front door.
func (f *Door) Replayer() deliver.Replayer {
	if f == nil {
		return nil
	}
	return f.door
}

// Serve answers clients until Close, as the door's part in the run's
// lifetime group: an error of its own is logged, and the run goes on
// without the door, as it always did.
func (f *Door) Serve() error {
	if err := f.door.Serve(f.ln); err != nil {
		f.logf("%v", err)
	}
	<-f.stopped
	return nil
}

// Close ends the door once the supervisor has returned (or when a later
// part of the run fails to open, before it ever served).
func (f *Door) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdown)
	defer cancel()
	if err := f.door.Close(ctx); err != nil {
		f.logf("%v", err)
	}
	_ = f.ln.Close() // Serve has closed it, unless it never ran
	close(f.stopped)
}

// Configure applies a reloaded [serve] (listen cannot change: a reload
// that changes it is refused).
func (f *Door) Configure(s policy.Serve) {
	if f != nil {
		f.door.Configure(config(s, f.bodies))
	}
}
