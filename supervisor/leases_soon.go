package supervisor

import (
	"sync"
	"time"
)

// releasePublishDelay is how long a released lease may stay in the figure
// the other tenants of the GPU see.
const releasePublishDelay = 100 * time.Millisecond

// publishSoon publishes the leases once, releasePublishDelay after the
// first release that has not been published yet, rather than at every
// release.
//
// Why this is safe: a release only lowers the figure, so until it is
// published the others count more leased on the GPU than this instance
// holds. For that span they can only be more careful than they need to be
// (a request deferred that would have fitted), never less: a reservation,
// which raises the figure, is still published before its admission lock
// goes (reserve).
//
// Why it matters: a queue of deferred tasks reserves, runs, releases and
// reserves again the same bytes, task after task. Published at once, each
// task wrote the tenant file twice (the lease, then zero), about a fifth
// of gpuguard's CPU per task; now the reservation after a release finds
// its figure already published and writes nothing.
type publishSoon struct {
	mu    sync.Mutex
	timer *time.Timer // armed: a release is not yet published
}

// arm makes sure publish runs within releasePublishDelay, unless done is
// closed by then (the loop has ended: a release after that was refused,
// and the run's end has flushed what was pending).
func (p *publishSoon) arm(done <-chan struct{}, publish func() error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		return
	}
	p.timer = time.AfterFunc(releasePublishDelay, func() {
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
func (p *publishSoon) flush(publish func() error) {
	p.mu.Lock()
	t := p.timer
	p.timer = nil
	p.mu.Unlock()
	if t != nil && t.Stop() {
		publish()
	}
}
