package supervisor

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/sharing"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
)

// TestLeasesNotRepublished: the child's exits clear no lease when none is
// held, and the figure the other tenants already see is not written again
// (a crash loop wrote a file into each GPU's tenant dir per exit).
func TestLeasesNotRepublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		h := startHarness(t, testPolicy(), withCoord(fc))
		for range 3 {
			h.child().end(Exit{Code: 1}) // a crash: restarted after the backoff
			synctest.Wait()
			time.Sleep(time.Second)
		}
		h.child().end(Exit{})
		h.wait()
		if p := fc.Published(); !slices.Equal(p, []uint64{0}) {
			t.Fatalf("published leases %v, want 0 once", p)
		}
	})
}

// TestReleasePublishedLater: a release reaches the other tenants within
// sharing.ReleasePublishDelay, not at once; a reservation of the same size before
// then writes nothing (the figure they see is already right), and one
// after it is published before Reserve returns. A release pending when the
// run ends is published then.
func TestReleasePublishedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		h := startHarness(t, testPolicy(), withCoord(fc))
		c := h.child()
		h.probe.setUsed(4 * gib)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		ctx := context.Background()
		req := admission.Request{Bytes: 2 * gib, Priority: "P1", TTL: time.Minute}
		reserve := func() string {
			t.Helper()
			d, err := h.sup.Admission().Reserve(ctx, req)
			if err != nil || d.Lease == "" {
				t.Fatalf("reserve: %+v %v", d, err)
			}
			return d.Lease
		}
		lease := reserve()
		for range 5 { // a queue of tasks: release, reserve the same again
			if err := h.sup.Admission().Release(ctx, lease); err != nil {
				t.Fatal(err)
			}
			lease = reserve()
		}
		if p := fc.Published(); !slices.Equal(p, []uint64{0, 2 * gib}) {
			t.Fatalf("published %v, want 0 then 2 GiB once: the releases between reservations of the same size write nothing", p)
		}
		if err := h.sup.Admission().Release(ctx, lease); err != nil {
			t.Fatal(err)
		}
		if p := fc.Published(); len(p) != 2 {
			t.Fatalf("published %v at the release: want it later", p)
		}
		time.Sleep(sharing.ReleasePublishDelay)
		synctest.Wait()
		if p := fc.Published(); !slices.Equal(p, []uint64{0, 2 * gib, 0}) {
			t.Fatalf("published %v, want 0 within sharing.ReleasePublishDelay of the release", p)
		}
		lease = reserve() // raising the figure is published before Reserve returns
		if p := fc.Published(); !slices.Equal(p, []uint64{0, 2 * gib, 0, 2 * gib}) {
			t.Fatalf("published %v, want the reservation at once", p)
		}
		if err := h.sup.Admission().Release(ctx, lease); err != nil {
			t.Fatal(err)
		}
		c.end(Exit{}) // the run ends with the release still pending
		h.wait()
		if p := fc.Published(); !slices.Equal(p, []uint64{0, 2 * gib, 0, 2 * gib, 0}) {
			t.Fatalf("published %v, want the pending release flushed at the end", p)
		}
	})
}
