package supervisor

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// TestWatermarkRecords: while a child runs, the loop journals a watermark
// record at each wall-clock minute, for the minute just passed, with the
// thresholds in force and the watched GPU; the child's exit closes the
// partial minute before the exit event. No record is written while no
// child runs.
func TestWatermarkRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // the bubble's clock starts on a minute
		pol := testPolicy()
		pol.Profiles[0].Needs = 4 * gib // fits beside 8 GiB
		h := startHarness(t, pol, func(c *Config, d *Deps) { d.Probe.(*fakeProbe).setUsed(8 * gib) })
		c := h.child()
		time.Sleep(30*time.Second - 50*time.Millisecond) // between samples
		h.probe.setUsed(12 * gib)
		time.Sleep(90 * time.Second)
		synctest.Wait()
		h.probe.setUsed(4 * gib)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		recs := h.rec.named(api.EventWatermark)
		if len(recs) != 2 {
			t.Fatalf("%d watermark records after 2m20s, want 2: %+v", len(recs), recs)
		}
		first, second := recs[0], recs[1]
		if !first.Time.Equal(start.Add(time.Minute)) || first.Min != 0.5 || first.Max != 0.75 ||
			first.Mean != 0.625 || first.Samples < 599 || first.Samples > 601 {
			t.Errorf("first minute %v %+v", first.Time, *first.Minute)
		}
		if !second.Time.Equal(start.Add(2*time.Minute)) || second.Min != 0.75 || second.Max != 0.75 || second.Samples != 600 {
			t.Errorf("second minute %v %+v", second.Time, *second.Minute)
		}
		for _, r := range recs {
			if r.GPU != "GPU-fake-0" || r.High != 0.90 || r.Critical != 0.97 || r.Name != "t" || r.Profile != "fp16" {
				t.Errorf("record %+v %+v", r, *r.Minute)
			}
		}
		exitAt := time.Now()
		c.end(Exit{})
		h.wait()
		evs := h.rec.named(api.EventWatermark)
		if len(evs) != 3 {
			t.Fatalf("%d records after the exit, want 3", len(evs))
		}
		last := evs[2]
		if !last.Time.Equal(exitAt) || last.Min != 0.25 || last.Max != 0.25 || last.Samples < 200 || last.Samples > 201 {
			t.Errorf("partial minute %v (exit %v) %+v", last.Time, exitAt, *last.Minute)
		}
		all := h.rec.all()
		if n := len(all); n < 2 || all[n-2].Event != api.EventWatermark || all[n-1].Event != api.EventExit {
			t.Errorf("the partial minute's record is not right before the exit: %v", eventNames(all))
		}
	})
}

func eventNames(evs []api.Event) []string {
	var names []string
	for _, ev := range evs {
		names = append(names, ev.Event)
	}
	return names
}

// all is every event observed, in order.
func (r *recorder) all() []api.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]api.Event(nil), r.events...)
}
