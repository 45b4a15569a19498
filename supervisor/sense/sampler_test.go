package sense

import (
	"context"
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
	newSampler(npu, 7*time.Second, time.Second).sample(context.Background())
	if !npu.had || npu.left <= 6*time.Second || npu.left > 7*time.Second {
		t.Errorf("interruptible probe: deadline %v, %s left; want one 7s away", npu.had, npu.left)
	}
	no := &interruptibleRecorder{honours: false}
	newSampler(no, 7*time.Second, time.Second).sample(context.Background())
	plain := &deadlineRecorder{}
	newSampler(plain, 7*time.Second, time.Second).sample(context.Background())
	if no.had || plain.had {
		t.Errorf("deadline given to a probe that says it cannot honour one: %v; to one that says nothing: %v; want none", no.had, plain.had)
	}
}
