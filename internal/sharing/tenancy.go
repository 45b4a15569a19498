package sharing

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// tenancy is what the other tenants know of this instance: its
// TenantInfo, and its outstanding admission leases on the watched GPUs.
// Its lease publications are safe from any goroutine.
type tenancy struct {
	c    Coordinator
	logf func(format string, args ...any)

	// mu serialises publishing the leases, and guards what follows.
	mu sync.Mutex
	// gpus are the watched GPUs of the newest TenantInfo published.
	gpus []string
	// out is what was last published: the same figure is not written
	// again (every exit of a crash loop would otherwise create a file in
	// each GPU's tenant dir).
	out *leaseFigure
	// first: the leases were published once the GPUs were known.
	first bool
	// soon publishes what releases left, a little later.
	soon publishSoon
}

// leaseFigure is one publication of the leases: how much, on which GPUs.
type leaseFigure struct {
	gpus  []string
	bytes uint64
}

func (f leaseFigure) equal(g leaseFigure) bool {
	return f.bytes == g.bytes && slices.Equal(f.gpus, g.gpus)
}

// Publish tells the other tenants what this instance is. The leases
// (read through leases) are published too, off the caller, once its GPUs
// are first known: a file left by an earlier instance of this name,
// killed, must not count as this one's leases. The loop publishes after
// every event, so the watched GPUs are copied only when they changed.
func (t *tenancy) Publish(info api.TenantInfo, leases func() uint64) {
	t.c.Publish(info)
	t.mu.Lock()
	if !sameGPUs(t.gpus, info.GPUs) {
		t.gpus = watched(info.GPUs) // a new slice: a published figure holds the old one
	}
	first := !t.first && len(t.gpus) > 0
	if first {
		t.first = true
	}
	t.mu.Unlock()
	if first {
		go t.PublishLeases(leases)
	}
}

// watched are the UUIDs of the GPUs in gpus that have one.
func watched(gpus []api.TenantGPU) []string {
	var out []string
	for _, g := range gpus {
		if g.UUID != "" {
			out = append(out, g.UUID)
		}
	}
	return out
}

// sameGPUs reports whether uuids are watched(gpus).
func sameGPUs(uuids []string, gpus []api.TenantGPU) bool {
	i := 0
	for _, g := range gpus {
		if g.UUID == "" {
			continue
		}
		if i == len(uuids) || uuids[i] != g.UUID {
			return false
		}
		i++
	}
	return i == len(uuids)
}

// Admit holds the admission locks of gpus for one reservation and says
// what the other tenants have leased there (api.Admission).
func (t *tenancy) Admit(ctx context.Context, gpus []string) (*api.Admission, error) {
	return t.c.Admit(ctx, gpus)
}

// PublishLeases tells the other tenants of the watched GPUs how much this
// instance has leased (leases, read now), unless they already see that
// figure.
func (t *tenancy) PublishLeases(leases func() uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.gpus) == 0 {
		return nil
	}
	f := leaseFigure{gpus: t.gpus, bytes: leases()}
	if t.out != nil && t.out.equal(f) {
		return nil // the others already see this figure
	}
	t.out = nil
	if err := t.c.SetLeases(f.gpus, f.bytes); err != nil {
		t.logf("%v", err)
		return err
	}
	t.out = &f
	return nil
}

// PublishLeasesSoon publishes the leases after a release, within
// ReleasePublishDelay, unless done is closed by then (publishSoon).
func (t *tenancy) PublishLeasesSoon(leases func() uint64, done <-chan struct{}) {
	t.soon.arm(done, func() { _ = t.PublishLeases(leases) })
}

// FlushLeases publishes at the end of the run what releases left and the
// others have not seen yet.
func (t *tenancy) FlushLeases(leases func() uint64) {
	t.soon.flush(func() { _ = t.PublishLeases(leases) })
}

// ReleasePublishDelay is how long a released lease may stay in the figure
// the other tenants of the GPU see.
const ReleasePublishDelay = 100 * time.Millisecond

// publishSoon publishes the leases once, ReleasePublishDelay after the
// first release that has not been published yet, rather than at every
// release.
//
// Why this is safe: a release only lowers the figure, so until it is
// published the others count more leased on the GPU than this instance
// holds. For that span they can only be more careful than they need to be
// (a request deferred that would have fitted), never less: a reservation,
// which raises the figure, is still published before its admission lock
// goes.
//
// Why it matters: a queue of deferred tasks reserves, runs, releases and
// reserves again the same bytes, task after task. Published at once, each
// task would write the tenant file twice (the lease, then zero), about a
// fifth of gpuguard's CPU per task; this way the reservation after a
// release finds its figure already published and writes nothing.
type publishSoon struct {
	mu    sync.Mutex
	timer *time.Timer // armed: a release is not yet published
}

// arm makes sure publish runs within ReleasePublishDelay, unless done is
// closed by then (the loop has ended: a release after that was refused,
// and the run's end has flushed what was pending).
func (p *publishSoon) arm(done <-chan struct{}, publish func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		return
	}
	p.timer = time.AfterFunc(ReleasePublishDelay, func() {
		p.mu.Lock()
		p.timer = nil
		p.mu.Unlock()
		select {
		case <-done:
		default:
			publish()
		}
	})
}

// flush publishes now what is pending, at the end of the run.
func (p *publishSoon) flush(publish func()) {
	p.mu.Lock()
	t := p.timer
	p.timer = nil
	p.mu.Unlock()
	if t != nil && t.Stop() {
		publish()
	}
}
