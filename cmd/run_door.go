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
	door *serve.Door
	ln   net.Listener
	done chan error
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
	return &frontDoor{door: d, ln: ln}, nil
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

// serve answers clients until close.
func (f *frontDoor) serve() {
	if f == nil {
		return
	}
	f.done = make(chan error, 1)
	go func() { f.done <- f.door.Serve(f.ln) }()
}

// close ends the door once the supervisor has returned.
func (f *frontDoor) close(logf func(string, ...any)) {
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), doorShutdown)
	defer cancel()
	if err := f.door.Close(ctx); err != nil {
		logf("front door: %v", err)
	}
	if f.done == nil {
		_ = f.ln.Close()
		return
	}
	if err := <-f.done; err != nil {
		logf("front door: %v", err)
	}
}

// configure applies a reloaded [serve] (listen cannot change: a reload
// that changes it is refused).
func (f *frontDoor) configure(s policy.Serve) {
	if f != nil {
		f.door.Configure(doorConfig(s))
	}
}
