package sharing

import (
	"context"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Coordinator is how an instance agrees with the other tenants of its
// GPUs (package tenants implements it). Its words are api's, so this
// package imports nothing of the one that implements it. Decide,
// ClaimStart, Admit, Void and Announce may wait on files and on other
// tenants' sockets: they are called off the supervisor's loop and their
// outcome comes back on a channel, so a hung peer never stalls it.
// Confirm only creates one local file and is called on the loop, as the
// state file is written there.
type Coordinator interface {
	Decide(ctx context.Context, p api.Proposal) api.Outcome
	Confirm(gpu string, seq int64, grace time.Duration) (api.TenantDecision, error)
	Void(gpu string, seq int64)
	Announce(d api.TenantDecision, sockets []string)
	ClaimStart(ctx context.Context, gpus []string, settle time.Duration) api.StartOutcome
	Admit(ctx context.Context, gpus []string) (*api.Admission, error)
	// SetLeases publishes this instance's outstanding leases to the other
	// tenants of gpus; calls are serialised, each with the current figure.
	SetLeases(gpus []string, bytes uint64) error
	// Publish tells the other tenants what this instance is (its ranking
	// facts). It must return at once: it is called after each event.
	Publish(info api.TenantInfo)
	// MakeRoom asks the idle tenants of ask.GPU to make room: it ranks
	// them, asks the first to sleep, and returns once its sleep is done
	// (or no candidate can cover the shortfall).
	MakeRoom(ctx context.Context, ask api.RoomAsk) api.RoomOutcome
}

// offLoop runs call, one of the coordinator's slow calls, on a goroutine
// of its own and sends its answer on out, unless ctx ends first (the loop
// reads out no more): a hung peer never stalls the supervisor's loop.
func offLoop[T any](ctx context.Context, out chan<- T, call func() T) {
	go func() {
		o := call()
		select {
		case out <- o:
		case <-ctx.Done():
		}
	}()
}
