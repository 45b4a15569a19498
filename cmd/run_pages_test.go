package cmd

import (
	"testing"
	"testing/synctest"

	"github.com/gpuguard/gpuguard/api"
)

// TestStartupPagesOnceAtTheFirstStart: the start-up pages are given back
// once, off the loop, at the first child's start; no other event, and no
// later start, releases anything.
func TestStartupPagesOnceAtTheFirstStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		p := &startupPages{release: func() (int64, error) { calls++; return 1, nil }, logf: t.Logf}
		for _, e := range []string{api.EventFit, api.EventStepDown, api.EventExit} {
			p.Observe(api.Event{Event: e})
		}
		synctest.Wait()
		if calls != 0 {
			t.Fatalf("%d releases before any start", calls)
		}
		p.Observe(api.Event{Event: api.EventStart})
		p.Observe(api.Event{Event: api.EventStart})
		synctest.Wait()
		if calls != 1 {
			t.Fatalf("%d releases after two starts, want 1", calls)
		}
	})
}
