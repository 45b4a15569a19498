package sharing

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// startOrder is this instance's side of the one start at a time on a
// shared GPU: the claim, off the loop, and the flag the other tenants
// read while it lasts. When to claim and when a start is over are the
// decision core's (core.ClaimStart, core.EndStart).
type startOrder struct {
	c      Coordinator
	starts chan api.StartOutcome
	// starting is read live by the `tenant` answer: set before a claim is
	// made, cleared when the start ends.
	starting atomic.Bool
}

// ClaimStart claims the start of gpus, off the loop; the answer comes
// back on Starts.
func (s *startOrder) ClaimStart(ctx context.Context, gpus []string, settle time.Duration) {
	// Say so before claiming: a tenant that sees our claim must see us
	// starting, or it would take the claim over.
	s.starting.Store(true)
	c := s.c
	offLoop(ctx, s.starts, func() api.StartOutcome { return c.ClaimStart(ctx, gpus, settle) })
}

// Starts is where the answers to the claims come.
func (s *startOrder) Starts() <-chan api.StartOutcome { return s.starts }

// EndStart ends this instance's start (or an attempt at one): the other
// tenants may start theirs.
func (s *startOrder) EndStart() { s.starting.Store(false) }

// Starting reports whether this instance holds (or is asking for) the
// start claim; safe from any goroutine.
func (s *startOrder) Starting() bool { return s.starting.Load() }
