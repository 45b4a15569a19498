package sense

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
)

// deadlineRecorder is a backend that says nothing of deadlines (NVML,
// DRM, sim); it records whether its call's context had one, and how far
// off.
type deadlineRecorder struct {
	had  bool
	left time.Duration
}

func (p *deadlineRecorder) Sample(ctx context.Context) (gpu.Sample, error) {
	var d time.Time
	d, p.had = ctx.Deadline()
	p.left = time.Until(d)
	return gpu.Sample{Time: time.Now()}, nil
}
func (p *deadlineRecorder) Close() error { return nil }

// interruptibleRecorder says whether it honours a deadline (npu-smi does).
type interruptibleRecorder struct {
	deadlineRecorder
	honours bool
}

func (p *interruptibleRecorder) Interruptible() bool { return p.honours }

// TestDeadlineOnlyWhereHonoured: a call of an interruptible probe is
// bounded by the probe timeout; a call of any other gets no deadline (it
// could not be cut short, and the loop notices one that runs past it).
func TestDeadlineOnlyWhereHonoured(t *testing.T) {
	npu := &interruptibleRecorder{honours: true}
	newSampler(npu, 7*time.Second, time.Second, NewRuntimeAlarm()).sample(context.Background())
	if !npu.had || npu.left <= 6*time.Second || npu.left > 7*time.Second {
		t.Errorf("interruptible probe: deadline %v, %s left; want one 7s away", npu.had, npu.left)
	}
	no := &interruptibleRecorder{honours: false}
	newSampler(no, 7*time.Second, time.Second, NewRuntimeAlarm()).sample(context.Background())
	plain := &deadlineRecorder{}
	newSampler(plain, 7*time.Second, time.Second, NewRuntimeAlarm()).sample(context.Background())
	if no.had || plain.had {
		t.Errorf("deadline given to a probe that says it cannot honour one: %v; to one that says nothing: %v; want none", no.had, plain.had)
	}
}

// fixedProbe answers the same sample every time, without allocating.
type fixedProbe struct{ s gpu.Sample }

func (p *fixedProbe) Sample(context.Context) (gpu.Sample, error) { return p.s, nil }
func (p *fixedProbe) Close() error                               { return nil }

// TestCalmTreeAllocatesNothing: a sample that lists no GPU process but
// the child's own hands the loop the child alone, in a tree it shares
// with every such sample; one that lists a process of the child's tree
// names it too.
func TestCalmTreeAllocatesNothing(t *testing.T) {
	const child, grandchild, stranger = 100, 101, 200
	owned := func(pids []int) []int {
		var own []int
		for _, p := range pids {
			if p == grandchild {
				own = append(own, p)
			}
		}
		return own
	}
	for _, tc := range []struct {
		name  string
		procs []int
		want  []int
		calm  bool
	}{
		{"child alone", []int{child}, []int{child}, true},
		{"no process listed", nil, []int{child}, true},
		{"a stranger", []int{child, stranger}, []int{child}, false},
		{"a grandchild", []int{child, grandchild, stranger}, []int{child, grandchild}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fixedProbe{gpu.Sample{Time: time.Now(), ProcessesAt: time.Now()}}
			for _, pid := range tc.procs {
				p.s.Processes = append(p.s.Processes, gpu.Process{PID: pid, Used: 1})
			}
			s := newSampler(p, time.Second, time.Second, NewRuntimeAlarm())
			s.target.Store(newTarget(child, owned))
			r := s.sample(context.Background())
			if !slices.Equal(r.Tree, tc.want) || r.ForPID != child {
				t.Fatalf("tree %v for %d, want %v for %d", r.Tree, r.ForPID, tc.want, child)
			}
			if !tc.calm {
				return
			}
			if allocs := testing.AllocsPerRun(20, func() { s.sample(context.Background()) }); allocs != 0 {
				t.Errorf("a calm sample's tree allocates %.1f times, want 0", allocs)
			}
		})
	}
}
