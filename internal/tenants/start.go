package tenants

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// StartOutcome is ClaimStart's answer (the supervisor's word, api.StartOutcome).
type StartOutcome = api.StartOutcome

// ClaimStart claims the start of a child on every GPU in gpus, in UUID
// order (so two tenants of the same GPUs cannot wait on each other). On
// each GPU it waits (outcome not granted) while the newest claim belongs to
// another tenant that says it is still starting and is younger than
// StartHoldFactor x that tenant's settle; a holder that is dead, does not
// answer or has finished starting holds nothing. The caller must already
// say that it is starting (TenantInfo.Starting) before it calls, so that a
// tenant racing it that sees its claim also sees it starting; and must stop
// saying so when not granted.
func (c *Coordinator) ClaimStart(ctx context.Context, gpus []string, settle time.Duration) StartOutcome {
	gpus = slices.Sorted(slices.Values(gpus))
	for _, g := range gpus {
		if o := c.claimStart(ctx, g, settle); !o.Granted {
			return o
		}
	}
	return StartOutcome{Granted: true}
}

func (c *Coordinator) claimStart(ctx context.Context, gpu string, settle time.Duration) StartOutcome {
	dir, err := GPUDir(c.o.RuntimeDir, gpu)
	if err != nil {
		return StartOutcome{GPU: gpu, Err: err}
	}
	c.maybeSweep(dir)
	for range maxAttempts {
		now := c.o.Now()
		claims, err := readStarts(dir, now)
		if err != nil {
			return StartOutcome{GPU: gpu, Err: err}
		}
		blocker, next := Blocking(claims, c.o.Name, now)
		if blocker != nil {
			if info, err := c.ask(ctx, c.socket(blocker.By)); err == nil && info.Starting {
				return StartOutcome{GPU: gpu, Holder: blocker.By}
			}
		}
		sc := StartClaim{Seq: next, By: c.o.Name, At: now.UnixNano(), SettleSeconds: settle.Seconds()}
		if err := create(dir, startName(next), sc); errors.Is(err, ErrTaken) {
			continue // another tenant claimed at the same moment: look at it
		} else if err != nil {
			return StartOutcome{GPU: gpu, Err: err}
		}
		if newest(dir, startPrefix) != next {
			continue // a stale view re-created a collected seq: look again
		}
		if next%Keep == 0 {
			// Off the start's path: every Keep-th start would otherwise
			// wait for Keep removals (each frees an inode: 0.2 ms or more
			// on ext4). A claim read meanwhile is void, and readStarts
			// reads none of those old ones anyway.
			c.wg.Go(func() { collect(dir, startPrefix, next) })
		}
		return StartOutcome{GPU: gpu, Granted: true}
	}
	return StartOutcome{GPU: gpu, Holder: "another tenant (claims keep racing)"}
}
