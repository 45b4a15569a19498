package status

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
)

// stuckProbe is a backend whose Sample stays inside the driver until
// released.
type stuckProbe struct {
	mu      sync.Mutex
	samples int
	closes  int
	release chan struct{}
}

func (p *stuckProbe) Sample(context.Context) (gpu.Sample, error) {
	p.mu.Lock()
	p.samples++
	p.mu.Unlock()
	<-p.release
	return gpu.Sample{Devices: []gpu.Device{{Index: 0, UUID: "GPU-0", Total: 1 << 30}}}, nil
}

func (p *stuckProbe) Close() error {
	p.mu.Lock()
	p.closes++
	p.mu.Unlock()
	return nil
}

func (p *stuckProbe) counts() (samples, closes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.samples, p.closes
}

// TestStatusWatchHungReading: under --watch, a reading given up at its
// 2 s is not joined by another on the next refreshes, which answer at
// once with a warning; once it returns, the next refresh reads again. The
// backend is not closed under a reading still inside it.
func TestStatusWatchHungReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stderr bytes.Buffer
		p := &stuckProbe{release: make(chan struct{})}
		g := &Gatherer{o: Options{ErrOut: &stderr}, probe: p, warned: map[string]bool{}}
		t0 := time.Now()
		if gpus := g.probeGPUs(context.Background()); len(gpus) != 0 {
			t.Errorf("a hung reading gave %v", gpus)
		}
		if d := time.Since(t0); d != ProbeTimeout {
			t.Errorf("the hung reading was given up after %s, want %s", d, ProbeTimeout)
		}
		for range 3 { // refreshes while it is stuck
			t0 = time.Now()
			if gpus := g.probeGPUs(context.Background()); len(gpus) != 0 || time.Since(t0) != 0 {
				t.Errorf("a refresh during the hung reading: %v after %s, want none at once", gpus, time.Since(t0))
			}
		}
		if n, _ := p.counts(); n != 1 {
			t.Errorf("%d readings entered the driver, want 1 (not joined by another)", n)
		}
		for _, want := range []string{"reading GPUs: no answer within 2s", "reading GPUs: the previous reading is still inside the driver"} {
			if strings.Count(stderr.String(), want) != 1 {
				t.Errorf("stderr %q, want %q once", stderr.String(), want)
			}
		}
		g.Close()
		if _, closes := p.counts(); closes != 0 {
			t.Error("closed under a reading still inside the driver")
		}

		close(p.release) // the driver answers: every later reading returns
		synctest.Wait()
		if gpus := g.probeGPUs(context.Background()); len(gpus) != 1 || gpus[0].UUID != "GPU-0" {
			t.Errorf("after the hung reading ended: %v, want GPU-0", gpus)
		}
		if n, _ := p.counts(); n != 2 {
			t.Errorf("%d readings, want 2", n)
		}
		g.Close()
		if _, closes := p.counts(); closes != 1 {
			t.Errorf("closed %d times once nothing was inside, want 1", closes)
		}
	})
}

// TestStatusWatchSlowOpen: under --watch, a backend still opening at the
// 2 s limit (nvmlInit on a large host without persistence mode, or a hung
// driver) is waited for again on the next refreshes, never opened twice,
// and its GPUs show once it is open. The warning is printed once.
func TestStatusWatchSlowOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stderr bytes.Buffer
		opened := make(chan struct{})
		p := &stuckProbe{release: make(chan struct{})}
		close(p.release) // its readings answer at once
		opens := 0
		g := &Gatherer{o: Options{ErrOut: &stderr, Open: func() (gpu.Probe, error) { opens++; <-opened; return p, nil }},
			warned: map[string]bool{}}
		for range 2 {
			t0 := time.Now()
			if gpus := g.probeGPUs(context.Background()); len(gpus) != 0 || time.Since(t0) != ProbeTimeout {
				t.Errorf("while opening: %v after %s, want none after %s", gpus, time.Since(t0), ProbeTimeout)
			}
		}
		close(opened)
		if gpus := g.probeGPUs(context.Background()); len(gpus) != 1 || gpus[0].UUID != "GPU-0" {
			t.Errorf("once open: %v, want GPU-0", gpus)
		}
		if opens != 1 {
			t.Errorf("opened %d times, want 1", opens)
		}
		if want := "no GPU information: opening the GPU backend: no answer within 2s"; strings.Count(stderr.String(), want) != 1 {
			t.Errorf("stderr %q, want %q once", stderr.String(), want)
		}
		g.Close()
		if _, closes := p.counts(); closes != 1 {
			t.Errorf("the late-opened backend was closed %d times, want 1", closes)
		}
	})
}
