package sense

import (
	"context"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
)

// idleProbe is a GPU that answers at once with nothing on it.
type idleProbe struct{}

func (idleProbe) Sample(context.Context) (gpu.Sample, error) {
	return gpu.Sample{Time: time.Now()}, nil
}
func (idleProbe) Close() error { return nil }

// TestSamplerWokenWhenTheLoopWaits: a sample asked for at once wakes the
// sampler only when the loop is about to wait (wake), not where it was
// asked: woken earlier, the sampler would run behind every goroutine the
// rest of the loop's turn readies (on a restart, the tenant info's and the
// journal's file writes), and the start waits for that sample.
func TestSamplerWokenWhenTheLoopWaits(t *testing.T) {
	p := NewPacer(nil, time.Second, time.Second, nil)
	p.ArmNow()
	if n := len(p.smp.kick); n != 0 {
		t.Fatalf("the sampler was woken where the sample was asked for (%d kicks)", n)
	}
	p.Wake()
	if n := len(p.smp.kick); n != 1 {
		t.Fatalf("%d kicks after wake, want 1", n)
	}
	p.Wake() // nothing more asked: no second kick, and no block
	p.ArmNow()
	p.Wake() // a kick already pending does the same
	if n := len(p.smp.kick); n != 1 {
		t.Errorf("%d kicks, want 1", n)
	}
}

// TestKickedSampleDoesNotYield: a call on the timer yields first
// (newTimeSlice); a kicked one, which the loop waits for, does not.
func TestKickedSampleDoesNotYield(t *testing.T) {
	s := newSampler(idleProbe{}, time.Second, time.Hour, NewRuntimeAlarm())
	yields := 0
	s.yield = func() { yields++ }
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		s.run(context.Background(), done)
	}()
	s.kick <- struct{}{}
	<-s.out
	if yields != 0 {
		t.Errorf("a kicked call yielded %d times", yields)
	}
	s.next.Reset(0)
	<-s.out
	close(done)
	<-ended
	if yields != 1 {
		t.Errorf("a call on the timer yielded %d times, want 1", yields)
	}
}

// TestSetTimeoutReachesTheSampler: the probe timeout the pacer is given,
// at first or by a reload, is the one the sampler bounds each call by.
func TestSetTimeoutReachesTheSampler(t *testing.T) {
	p := NewPacer(idleProbe{}, 7*time.Second, time.Second, nil)
	if got := time.Duration(p.smp.timeout.Load()); got != 7*time.Second || p.Timeout() != 7*time.Second {
		t.Fatalf("sampler %s, pacer %s, want 7s", got, p.Timeout())
	}
	p.SetTimeout(3 * time.Second)
	if got := time.Duration(p.smp.timeout.Load()); got != 3*time.Second || p.Timeout() != 3*time.Second {
		t.Fatalf("after SetTimeout: sampler %s, pacer %s, want 3s", got, p.Timeout())
	}
}

// TestOverdue: a hung fire counts only at or after the deadline in force;
// one from before a result moved it on (a kernel alarm can deliver it
// late) does not.
func TestOverdue(t *testing.T) {
	p := NewPacer(idleProbe{}, 2*time.Second, time.Second, nil)
	defer p.Stop()
	p.ArmNow()
	first := p.hungAt
	if p.Overdue(first.Add(-time.Nanosecond)) || !p.Overdue(first) {
		t.Fatalf("Overdue around the deadline %v: wrong", first)
	}
	now := first.Add(-time.Second)
	p.Reschedule(Result{Due: now, Next: now.Add(time.Second)}, now)
	if p.Overdue(first) {
		t.Errorf("a fire at the old deadline %v is overdue after the deadline moved to %v", first, p.hungAt)
	}
	if !p.Overdue(p.hungAt) {
		t.Error("a fire at the new deadline is not overdue")
	}
}
