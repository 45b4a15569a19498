package cmd

import (
	"context"
	"net"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/serve"
	"github.com/gpuguard/gpuguard/supervisor"
)

// frontDoor is the run's [serve] front door, or nothing (every method is
// safe on a nil *frontDoor).
type frontDoor struct {
	door    *serve.Door
	ln      net.Listener
	stopped chan struct{} // closed by close: serve returns
	logf    func(string, ...any)
}

// doorShutdown bounds the door's own shutdown after the child has stopped:
// the stop already drained it, so only held requests remain, and they are
// answered 503 at once.
const doorShutdown = 2 * time.Second

// openDoor binds [serve] listen, before anything else starts: an address
// in use is an error naming it, with nothing started. status and healthy
// are the supervisor's (called only once it runs).
func openDoor(s policy.Serve, status func() api.Status, healthy func(gen int), requested func(held bool), meter serve.Meter,
	queue serve.Queue, logf func(string, ...any)) (*frontDoor, error) {
	if !s.Enabled() {
		return nil, nil
	}
	ln, err := serve.Listen(s.Listen)
	if err != nil {
		return nil, err
	}
	d := serve.New(doorConfig(s), serve.Options{Status: status, OnHealthy: healthy, OnRequest: requested, Meter: meter, Queue: queue,
		Logf: func(format string, args ...any) { logf("front door: "+format, args...) }})
	return &frontDoor{door: d, ln: ln, stopped: make(chan struct{}), logf: logf}, nil
}

// doorConfig is [serve] as the door takes it.
func doorConfig(s policy.Serve) serve.Config {
	return serve.Config{Upstream: s.Upstream, Health: s.Health, Hold: s.Hold, MaxHeld: s.MaxHeld,
		Retry: s.Retry, Fallback: s.Fallback, Priority: s.Priority}
}

// dep is the door as the supervisor's dependency: a nil interface without
// a front door.
func (f *frontDoor) dep() supervisor.Door {
	if f == nil {
		return nil
	}
	return f.door
}

// replayer is the door as the replayer of deferred requests: a nil
// interface without a front door.
func (f *frontDoor) replayer() supervisor.Replayer {
	if f == nil {
		return nil
	}
	return f.door
}

// serve answers clients until close, as the door's part in the run's
// lifetime group: an error of its own is logged, and the run goes on
// without the door, as it always did.
func (f *frontDoor) serve() error {
	if err := f.door.Serve(f.ln); err != nil {
		f.logf("front door: %v", err)
	}
	<-f.stopped
	return nil
}

// close ends the door once the supervisor has returned (or when a later
// part fails to open, before it ever served).
func (f *frontDoor) close() {
	ctx, cancel := context.WithTimeout(context.Background(), doorShutdown)
	defer cancel()
	if err := f.door.Close(ctx); err != nil {
		f.logf("front door: %v", err)
	}
	_ = f.ln.Close() // Serve has closed it, unless it never ran
	close(f.stopped)
}

// configure applies a reloaded [serve] (listen cannot change: a reload
// that changes it is refused).
func (f *frontDoor) configure(s policy.Serve) {
	if f != nil {
		f.door.Configure(doorConfig(s))
	}
}
