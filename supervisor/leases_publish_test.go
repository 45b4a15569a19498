package supervisor

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestLeasesNotRepublished: the child's exits clear no lease when none is
// held, and the figure the other tenants already see is not written again
// (a crash loop wrote a file into each GPU's tenant dir per exit).
func TestLeasesNotRepublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &fakeCoord{}
		h := startHarness(t, testPolicy(), withCoord(fc))
		for range 3 {
			h.child().end(Exit{Code: 1}) // a crash: restarted after the backoff
			synctest.Wait()
			time.Sleep(time.Second)
		}
		h.child().end(Exit{})
		h.wait()
		if p := fc.published(); !slices.Equal(p, []uint64{0}) {
			t.Fatalf("published leases %v, want 0 once", p)
		}
	})
}
