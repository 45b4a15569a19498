package supervisor

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// calmLoop is a loop driven by hand, without Run's goroutines: the
// default policy (adaptive, calm at one sample a second), a child that
// runs and is past its start, on a GPU whose reading does not move, and a
// service manager to tell. door, when not nil, is its front door, and
// its child is ready.
type calmLoop struct {
	l     *loop
	probe *fakeProbe
	pid   int
}

func newCalmLoop(t testing.TB, door Door, mod func(*policy.Policy)) *calmLoop {
	t.Helper()
	pol := policy.Default()
	pol.Command = []string{"server"}
	if mod != nil {
		mod(pol)
	}
	c := &calmLoop{probe: newFakeProbe(16 * gib)}
	c.probe.setUsed(2 * gib)
	rec := &recorder{}
	s, err := New(Config{Name: "calm", Policy: pol, Command: pol.Command, StatePath: "/state/state.json"},
		Deps{Probe: c.probe, Launcher: newFakeLauncher(), WriteState: rec.writeState, RotateCheckpoint: rec.rotate,
			Observers: []Observer{rec}, Publisher: rec, Door: door, Notifier: &fakeNotifier{}})
	if err != nil {
		t.Fatal(err)
	}
	c.l = s.loop
	c.l.ctx = context.Background()
	c.l.feed(core.Begin{}, nil)
	for range 30 { // the start, its settling and the trend's calm
		c.l.onSample(c.result())
		c.l.publishSnapshot()
		if c.l.life.run.child != nil && c.pid == 0 {
			c.pid = c.l.life.run.child.PID()
			if door != nil {
				c.l.onHealthy(c.l.life.hist.starts)
				c.l.publishSnapshot()
			}
		}
		time.Sleep(time.Second)
	}
	if c.l.life.state != "running" || c.l.pace.Period() != pol.Watch.MaxInterval {
		t.Fatalf("not calm: state %s, period %s", c.l.life.state, c.l.pace.Period())
	}
	return c
}

// result is the sample a sampler would hand the loop now: a fresh
// reading of the probe, as a real one is (its slices new each time).
func (c *calmLoop) result() sense.Result {
	s, _ := c.probe.Sample(context.Background())
	now := time.Now()
	r := sense.Result{Sample: s, Due: now, Next: now.Add(c.l.pace.Period())}
	if c.pid != 0 {
		r.ForPID, r.Tree = c.pid, []int{c.pid}
	}
	return r
}

// calmSample is what the loop does with one calm sample: onSample, then
// the snapshot it publishes after every event.
func (c *calmLoop) calmSample(r sense.Result) {
	c.l.onSample(r)
	c.l.publishSnapshot()
}

// servingPolicy is a calm loop's policy behind a front door: it sleeps
// after an hour without a request, in a profile it can be woken from, so
// that every part of the status and the tenant record is made at each
// sample.
func servingPolicy(pol *policy.Policy) {
	pol.Serve.Listen, pol.Serve.Upstream = "127.0.0.1:8000", upstream
	pol.Serve.Wake, pol.Serve.Idle = true, time.Hour
	pol.Profiles = append(pol.Profiles, policy.Profile{Name: "off", NotServing: true})
}

// newServingCalmLoop is a calm loop on servingPolicy behind a front door
// whose child is ready.
func newServingCalmLoop(t testing.TB) *calmLoop {
	d := newFakeDoor()
	d.ready = true
	return newCalmLoop(t, d, servingPolicy)
}

// newCalmCase is a calm loop on the default policy, or, withDoor, a
// serving one (newServingCalmLoop).
func newCalmCase(t testing.TB, withDoor bool) *calmLoop {
	if !withDoor {
		return newCalmLoop(t, nil, nil)
	}
	return newServingCalmLoop(t)
}

// TestCalmSampleAllocatesNothing: a calm sample that changes nothing the
// loop shows allocates nothing in the loop, with a front door or without.
func TestCalmSampleAllocatesNothing(t *testing.T) {
	for _, withDoor := range []bool{false, true} {
		t.Run(map[bool]string{false: "nodoor", true: "door"}[withDoor], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if allocs := newCalmCase(t, withDoor).allocs(); allocs != 0 {
					t.Errorf("a calm sample allocates %.1f times, want 0", allocs)
				}
			})
		})
	}
}

// TestCalmSampleAllocatesNothingInProcessScope: the same where the
// watermark is the child's own processes' usage (scope = "process"),
// which the backend lists.
func TestCalmSampleAllocatesNothingInProcessScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCalmLoop(t, nil, func(pol *policy.Policy) { pol.Watch.Scope = policy.ScopeProcess })
		c.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: 2 * gib}, {PID: c.pid + 1, Device: 0, Used: gib}})
		for range 5 { // the usage the processes show is published once
			time.Sleep(time.Second)
			c.calmSample(c.result())
		}
		if c.l.latest.ratio != 0.125 {
			t.Fatalf("ratio %v, want the child's own 2 GiB of 16", c.l.latest.ratio)
		}
		if allocs := c.allocs(); allocs != 0 {
			t.Errorf("a calm sample in process scope allocates %.1f times, want 0", allocs)
		}
	})
}

// allocs is what one calm sample allocates, on average over 20. The
// results are made beforehand: a real probe's reading is new memory each
// time, and that is the probe's.
func (c *calmLoop) allocs() float64 {
	const runs = 20
	results := make([]sense.Result, 0, runs+1)
	for range runs + 1 {
		results = append(results, c.result())
	}
	i := 0
	return testing.AllocsPerRun(runs, func() {
		time.Sleep(time.Second)
		r := results[i]
		i++
		r.Due = time.Now()
		r.Next = r.Due.Add(time.Second)
		c.calmSample(r)
	})
}

// BenchmarkCalmSample is the loop's own work at one calm sample (the
// probe's call and the hand-off to the loop left out). Its set-up takes
// 30 s of real time: the start settles and the trend calms down.
func BenchmarkCalmSample(b *testing.B) {
	for _, withDoor := range []bool{false, true} {
		b.Run(map[bool]string{false: "nodoor", true: "door"}[withDoor], func(b *testing.B) {
			c := newCalmCase(b, withDoor)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				r := c.result()
				b.StartTimer()
				c.calmSample(r)
			}
		})
	}
}

// countingDoor is a front door that counts the reads of its activity,
// each of which takes the door's lock.
type countingDoor struct {
	*fakeDoor
	reads atomic.Int64
}

func (d *countingDoor) InFlight() int         { d.reads.Add(1); return d.fakeDoor.InFlight() }
func (d *countingDoor) Held() int             { d.reads.Add(1); return d.fakeDoor.Held() }
func (d *countingDoor) LastAnswer() time.Time { d.reads.Add(1); return d.fakeDoor.LastAnswer() }

// TestCalmSampleReadsActivityForIdleOnly: a calm sample behind a front
// door reads the door's activity only where [serve] idle can apply.
func TestCalmSampleReadsActivityForIdleOnly(t *testing.T) {
	for _, idle := range []time.Duration{0, time.Hour} {
		synctest.Test(t, func(t *testing.T) {
			d := &countingDoor{fakeDoor: newFakeDoor()}
			d.ready = true
			c := newCalmLoop(t, d, func(pol *policy.Policy) {
				servingPolicy(pol)
				pol.Serve.Idle = idle
			})
			d.reads.Store(0)
			time.Sleep(time.Second)
			c.calmSample(c.result())
			switch n := d.reads.Load(); {
			case idle == 0 && n != 0:
				t.Errorf("[serve] idle off: a calm sample read the door's activity %d times, want 0", n)
			case idle > 0 && n == 0:
				t.Errorf("[serve] idle %s: a calm sample did not read the door's activity", idle)
			}
		})
	}
}

// TestCalmSampleStoresNothing: a calm sample publishes neither a new
// status snapshot nor a new tenant record; one that moves the GPU's
// usage publishes a snapshot with the new usage.
func TestCalmSampleStoresNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newServingCalmLoop(t)
		snap, told := c.l.s.snap.Load(), c.l.s.adm.tenant.Load()
		if told.Room == nil || len(snap.status.Models) == 0 || snap.status.Serve == "" {
			t.Fatalf("the door's parts missing: room %v, models %v, serve %q", told.Room, snap.status.Models, snap.status.Serve)
		}
		time.Sleep(time.Second)
		c.calmSample(c.result())
		if c.l.s.snap.Load() != snap || c.l.s.adm.tenant.Load() != told {
			t.Fatal("a calm sample published a new snapshot or tenant record")
		}
		c.probe.setUsed(3 * gib)
		time.Sleep(time.Second)
		c.calmSample(c.result())
		st := c.l.s.Status()
		if c.l.s.snap.Load() == snap || len(st.GPUs) != 1 || st.GPUs[0].UsedBytes != 3*gib {
			t.Errorf("after the usage moved: gpus %+v, snapshot new %v", st.GPUs, c.l.s.snap.Load() != snap)
		}
	})
}
