package cmd

import (
	"sync"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/execpages"
)

// startupPages gives back, once, the pages of gpuguard's executable that
// its start-up mapped (package execpages): when the first child has been
// launched, the command line, the policy, every package's init, the first
// fit and the launch have run, and what a calm instance runs from then on
// maps its own pages again. An idle instance's RSS falls from about 19 MiB
// to about 11 (docs/performance.md, "Idle RSS").
type startupPages struct {
	once    sync.Once
	release func() (int64, error)
	logf    func(format string, args ...any)
}

func newStartupPages(logf func(format string, args ...any)) *startupPages {
	return &startupPages{release: execpages.Release, logf: logf}
}

// Observe is called on the supervisor's loop for every event: the first
// start sends the release off the loop.
func (p *startupPages) Observe(ev api.Event) {
	if ev.Event != api.EventStart {
		return
	}
	p.once.Do(func() {
		go func() {
			if _, err := p.release(); err != nil {
				p.logf("giving back start-up pages: %v", err)
			}
		}()
	})
}
