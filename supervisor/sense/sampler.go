package sense

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
)

// Result is one probe call, made off the loop goroutine.
type Result struct {
	Sample gpu.Sample
	Err    error
	Took   time.Duration
	// Tree are the child's processes among those holding GPU memory, for
	// the child whose main process is ForPID (0: none).
	Tree   []int
	ForPID int
	// Due is when the call was due; Next when the sampler armed the next
	// one for (Due + the period the loop last asked for), before the call.
	Due, Next time.Time
}

// target is the child whose processes a sample looks for.
type target struct {
	pid   int               // the child's main process
	owned func([]int) []int // which GPU processes are the child's; nil: unknown
	// alone is the tree of a sample that lists no other process: pid
	// alone. It is shared by those samples' results and never written,
	// so that a calm sample allocates no tree.
	alone []int
}

// newTarget is the target of a sampler that finds the tree of process pid
// with owned (nil: unknown).
func newTarget(pid int, owned func([]int) []int) *target {
	return &target{pid: pid, owned: owned, alone: []int{pid}}
}

// sampler makes the probe calls, one at a time, on one goroutine for the
// whole run, so a hung driver call blocks it and never the loop. It sleeps
// on its own timer, next, and as soon as it wakes re-arms it for the
// following call with the period the loop last published, before it calls
// the probe: a sample costs the timer's wake-up of the sampler and one
// hand-off, the result, to the loop, and nothing wakes the loop between
// samples. (Re-arming first matters: a timer moved earlier than the one a
// sleeping thread waits for wakes that thread.) The loop re-arms next only
// when the period it computes from the result differs, or when it wants a
// sample at once (kick: a start waits for it, so it must not wait for a
// timer). out holds one result, so the sampler never waits for the loop to
// take it.
type sampler struct {
	probe gpu.Probe
	// timeout bounds each call of an interruptible probe (npu-smi); any
	// other gets no deadline, and the loop notices a call that runs past
	// it on its own (Pacer.Hung). Nanoseconds; a reload may change it.
	timeout       atomic.Int64
	interruptible bool
	next          Alarm
	kick          chan struct{}
	period        atomic.Int64           // nanoseconds
	target        atomic.Pointer[target] // nil: no child
	out           chan Result
	yield         func() // before a call on the timer: newTimeSlice
}

func newSampler(probe gpu.Probe, timeout, period time.Duration, next Alarm) *sampler {
	s := &sampler{probe: probe, next: next, kick: make(chan struct{}, 1), out: make(chan Result, 1), yield: newTimeSlice}
	if p, ok := probe.(gpu.Interruptible); ok {
		s.interruptible = p.Interruptible()
	}
	s.timeout.Store(int64(timeout))
	s.period.Store(int64(period))
	return s
}

func (s *sampler) run(ctx context.Context, done <-chan struct{}) {
	for {
		var due time.Time
		kicked := false
		select {
		case due = <-s.next.C():
		case <-s.kick:
			due, kicked = time.Now(), true
		case <-done:
			return
		}
		if !kicked {
			// A kicked call is one the loop waits for (a start): it runs
			// now, not behind what the loop readied before it waited
			// (the tenant info publisher's file write, on a restart).
			s.yield()
		}
		now := time.Now()
		next := due.Add(time.Duration(s.period.Load()))
		if next.Before(now) {
			next = now
		}
		s.next.Reset(next.Sub(now))
		r := s.sample(ctx)
		r.Due, r.Next = due, next
		select {
		case s.out <- r:
		case <-done:
			return
		}
	}
}

// newTimeSlice yields the processor once, so that the sample that follows
// runs on a scheduler tick of its own. Only calls on the timer yield: a
// kicked call is one the loop waits for, and a yield puts it behind
// whatever else is runnable (TestKickedSampleDoesNotYield).
//
// The Go runtime's sysmon preempts whatever runs on a processor (a SIGURG
// to its thread, or the processor taken from a thread in a system call and
// handed to another) when it finds the processor on the same scheduler
// tick as at its previous look, 10 ms or more earlier. Goroutines readied
// by a timer or a channel send run on the tick of whoever readied them
// (runnext), and sysmon sleeps through a calm period and wakes with the
// sampler's timer: its first look at a running sample found the tick it
// saw a second earlier, so about every other sample got a preemption
// signal and a thread hand-off it did not need (golang/go#60693 is about
// such preemptions). A yield goes through the scheduler's global queue,
// which starts a new tick. It cuts a calm sample's thread wake-ups from
// about 9 to 3 (the timer's, and sysmon's two); see docs/performance.md
// ("The sysmon fix").
func newTimeSlice() { runtime.Gosched() }

func (s *sampler) sample(ctx context.Context) Result {
	t0 := time.Now()
	smp, err := s.call(ctx)
	r := Result{Sample: smp, Err: err, Took: time.Since(t0)}
	if tg := s.target.Load(); tg != nil {
		r.ForPID = tg.pid
		// Only processes that hold GPU memory can matter, so only they
		// are checked: no scan of every process on the host.
		r.Tree = tg.alone
		if tg.owned == nil {
			return r
		}
		var others []int
		for _, p := range smp.Processes {
			if p.PID != tg.pid {
				others = append(others, p.PID)
			}
		}
		if len(others) == 0 {
			return r
		}
		if own := tg.owned(others); len(own) > 0 {
			r.Tree = append([]int{tg.pid}, own...)
		}
	}
	return r
}

// call is one probe call, bounded by the probe timeout when the probe can
// honour a deadline: a context with one arms a runtime timer and joins the
// run's context, about a tenth of a calm instance's CPU time with the sim
// backend, for nothing when the backend cannot be cut short anyway.
func (s *sampler) call(ctx context.Context) (gpu.Sample, error) {
	if !s.interruptible {
		return s.probe.Sample(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(s.timeout.Load()))
	defer cancel()
	return s.probe.Sample(cctx)
}
