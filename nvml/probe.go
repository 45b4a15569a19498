//go:build cgo

package nvml

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuguard/gpuguard/gpu"
)

// probe is the NVML gpu.Probe.
type probe struct {
	lib      Library
	devices  []*device
	interval time.Duration

	// busy is a one-slot semaphore held while NVML is called. A Sample
	// abandoned by its caller (deadline passed, the driver hung) keeps it,
	// and the next Sample waits for it only as long as its own ctx allows,
	// so the caller never blocks on a hung driver.
	busy   chan struct{}
	closed atomic.Bool // set first thing by Close: no Sample enters the driver after it

	procs   []gpu.Process
	procsAt time.Time // zero: not taken yet, or no GPU supports the query
	tried   time.Time // last refresh attempt, to space them by interval

	// Fault events start on the first Faults call, so that a probe only
	// sampled (gpuguard status) costs no event goroutine.
	faults       chan gpu.Fault
	faultsOnce   sync.Once
	events       *events // nil: not started, or nothing to listen to
	eventTimeout time.Duration
	logf         func(string, ...any)
}

func newProbe(lib Library, o Options) (*probe, error) {
	ts, err := selectTargets(lib, o.Devices)
	if err != nil {
		return nil, err
	}
	// An old driver lacks the v2 symbol, and calling a missing symbol
	// would kill the process; ask the loader first.
	v1 := lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") != nil
	p := &probe{lib: lib, interval: o.processInterval(), busy: make(chan struct{}, 1),
		faults: make(chan gpu.Fault, 16), eventTimeout: o.eventTimeout(), logf: o.logf()}
	for _, t := range ts {
		d, err := newDevice(t, v1)
		if err != nil {
			return nil, err
		}
		p.devices = append(p.devices, d)
	}
	return p, nil
}

// Sample reads every watched GPU's memory and, once per interval, the
// processes on them. NVML calls cannot be interrupted, so ctx is checked
// between calls; a GPU that answers "lost" makes the sample fail with
// gpu.ErrGPULost, and the next Sample looks for it again (a GPU that
// comes back after a reset is picked up without restarting gpuguard).
// The returned Processes slice is shared between samples: do not modify it.
func (p *probe) Sample(ctx context.Context) (gpu.Sample, error) {
	select {
	case p.busy <- struct{}{}:
	case <-ctx.Done():
		return gpu.Sample{}, fmt.Errorf("NVML: waiting for the previous sample: %w", ctx.Err())
	}
	defer func() { <-p.busy }()
	if p.closed.Load() {
		return gpu.Sample{}, errors.New("NVML: probe is closed")
	}

	now := time.Now()
	smp := gpu.Sample{Time: now, Devices: make([]gpu.Device, 0, len(p.devices))}
	for _, d := range p.devices {
		if err := ctx.Err(); err != nil {
			return gpu.Sample{}, fmt.Errorf("NVML: sampling GPU %d: %w", d.index, err)
		}
		if d.lost {
			if err := d.relocate(p.lib); err != nil {
				return gpu.Sample{}, err
			}
		}
		used, total, err := d.memory()
		if err != nil {
			return gpu.Sample{}, err
		}
		smp.Devices = append(smp.Devices, gpu.Device{
			Index: d.index, UUID: d.uuid, Name: d.name, Used: used, Total: total,
		})
	}
	if p.tried.IsZero() || now.Sub(p.tried) >= p.interval {
		if err := p.refresh(ctx, now); err != nil {
			return gpu.Sample{}, err
		}
	}
	smp.Processes, smp.ProcessesAt = p.procs, p.procsAt
	return smp, nil
}

// refresh replaces the cached process list. On failure the cache is kept
// and the next Sample tries again.
func (p *probe) refresh(ctx context.Context, now time.Time) error {
	var procs []gpu.Process
	known := false
	for _, d := range p.devices {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("NVML: listing processes on GPU %d: %w", d.index, err)
		}
		var ok bool
		var err error
		procs, ok, err = d.processes(procs)
		if err != nil {
			return err
		}
		known = known || ok
	}
	p.tried = now
	if !known {
		// No GPU can tell: per-process usage is unknown, not empty.
		p.procs, p.procsAt = nil, time.Time{}
		return nil
	}
	p.procs, p.procsAt = procs, now
	return nil
}

// Faults starts listening for fault events (critical Xids, double-bit ECC
// errors) on the watched GPUs and returns the channel they arrive on.
func (p *probe) Faults() <-chan gpu.Fault {
	p.faultsOnce.Do(func() {
		ws := make([]watched, len(p.devices))
		for i, d := range p.devices {
			ws[i] = watched{uuid: d.uuid, index: d.index, parent: d.parent, gi: d.gi, ci: d.ci}
		}
		p.events = startEvents(p.lib, ws, p.eventTimeout, p.faults, p.logf)
	})
	return p.faults
}

// closeWait is how long Close waits for a Sample still inside the driver:
// a healthy call takes milliseconds, a hung one may never return.
const closeWait = time.Second

// Close ends the probe without ever waiting on the driver for long. NVML
// is shut down only when nothing is inside it: go-nvml's Shutdown unloads
// the library, under a call still running in it, or before the event
// goroutine frees its set. So Close does not wait out an event Wait in
// flight (up to EventTimeout, which would hold every gpuguard exit up to
// 5 s), and waits closeWait at most for a Sample; either still inside the
// driver leaves NVML loaded, for the process's exit to unload. The event
// goroutine frees its set when its Wait returns. A Sample that has not
// returned within closeWait is an error: the driver is hung.
func (p *probe) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.faultsOnce.Do(func() {}) // no listening starts from now on
	eventsEnded := p.events == nil || p.events.close()
	select {
	case p.busy <- struct{}{}:
		defer func() { <-p.busy }()
	case <-time.After(closeWait):
		return fmt.Errorf("NVML: a call has been inside the driver for over %s (hung?); not shutting NVML down", closeWait)
	}
	if !eventsEnded {
		return nil
	}
	if ret := p.lib.Shutdown(); ret != gonvml.SUCCESS {
		return fmt.Errorf("NVML: shutting down: %w", ret)
	}
	return nil
}
