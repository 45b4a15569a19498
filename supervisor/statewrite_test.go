package supervisor

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

// TestStepWithoutStateFile: while the state file cannot be written (a full
// disk, a read-only state dir), a manual step replies an error naming the
// reason, into a live profile and into a restart alike, and nothing
// happens: no signal, nothing published, no stepdown event, the level
// unchanged: a reply of ok would send the child SIGUSR1 to read the old
// profile. Once writes work, the same step is taken.
func TestStepWithoutStateFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		pol.Profiles[2].Live = false
		h := startHarness(t, pol, nil)
		c := h.child()
		synctest.Wait()
		published := len(h.rec.published)
		h.rec.failStates(syscall.ENOSPC)
		ctx := context.Background()
		for i, want := range []string{"not stepping to int8", "not stepping: writing the state file"} {
			if i == 1 { // int4 is not live: a restart
				h.rec.failStates(nil)
				if _, err := h.sup.Step(ctx, "down"); err != nil {
					t.Fatal(err)
				}
				h.rec.failStates(syscall.EROFS)
			}
			_, err := h.sup.Step(ctx, "down")
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "writing the state file") {
				t.Fatalf("step %d: %v, want %q and the reason", i, err, want)
			}
		}
		if sigs := c.gotSignals(); len(sigs) != 1 { // the one SIGUSR1 of the step that worked
			t.Errorf("child got %v, want only the working step's SIGUSR1", sigs)
		}
		if n := len(h.rec.published); n != published+1 {
			t.Errorf("%d publishes, want %d", n, published+1)
		}
		if ev := h.rec.named(api.EventStepDown); len(ev) != 1 {
			t.Errorf("stepdown events %+v, want the one that worked", ev)
		}
		if st := h.sup.Status(); st.Level != 1 || st.State != api.StateRunning {
			t.Errorf("status %+v, want level 1, running", st)
		}
		h.signals <- syscall.SIGTERM
		synctest.Wait()
		c.end(Exit{})
		h.wait()
	})
}

// TestWatermarkStepWithoutStateFile: a watermark step whose state file
// cannot be written is not taken and is tried at every sample, journaled
// once for the run of failures; the first sample after writes work takes
// it, and its state file has the next seq.
func TestWatermarkStepWithoutStateFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h := startHarness(t, pol, nil)
		c := h.child()
		synctest.Wait()
		h.rec.failStates(syscall.ENOSPC)
		h.probe.setUsed(15 * gib) // 0.94 > 0.90
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if errs := h.rec.named(EventStateError); len(errs) != 1 || !strings.Contains(errs[0].Detail, "no space left") {
			t.Fatalf("state_error events %+v, want one naming the reason", errs)
		}
		if len(h.rec.named(api.EventStepDown)) != 0 || len(c.gotSignals()) != 0 {
			t.Fatal("a step was taken without its state file")
		}
		h.rec.failStates(nil)
		time.Sleep(200 * time.Millisecond) // two samples at 100 ms
		synctest.Wait()
		if ev := h.rec.named(api.EventStepDown); len(ev) != 1 || ev[0].To != "int8" {
			t.Fatalf("stepdowns %+v, want one to int8 at the next sample", ev)
		}
		if st := h.rec.lastState(); st.Seq != 2 || st.Level != 1 {
			t.Errorf("state %+v, want seq 2 at level 1", st)
		}
		if sigs := c.gotSignals(); len(sigs) != 1 {
			t.Errorf("signals %v, want one", sigs)
		}
		h.signals <- syscall.SIGTERM
		synctest.Wait()
		c.end(Exit{})
		h.wait()
	})
}

// TestDenialJournalsACutTool: a reservation whose tool name is 60 KB (the
// socket refuses it; here it comes another way) is denied, and journaled
// with the name cut to 256 bytes: 2,000 of them rotated every journal
// file out in 1.2 s before.
func TestDenialJournalsACutTool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		synctest.Wait()
		d, err := h.sup.Admission().Reserve(context.Background(), admission.Request{Bytes: 1, Priority: "P0", Tool: strings.Repeat("t", 60_000), TTL: time.Minute})
		if err != nil || d.Decision != admission.DecisionDeny {
			t.Fatalf("decision %+v, %v; want deny", d, err)
		}
		ev := h.rec.named(api.EventAdmission)
		if len(ev) != 1 || len(ev[0].Tool) != admission.MaxToolBytes {
			t.Fatalf("admission events %d, tool %d bytes; want one of %d", len(ev), len(ev[0].Tool), admission.MaxToolBytes)
		}
		h.signals <- syscall.SIGTERM
		synctest.Wait()
		c.end(Exit{})
		h.wait()
	})
}
