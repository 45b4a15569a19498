package status

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/backends"
	"github.com/gpuguard/gpuguard/internal/offcall"
)

// noAnswer says a backend call was given up at ProbeTimeout.
func noAnswer() string {
	return fmt.Sprintf("no answer within %s (is the driver hung?)", ProbeTimeout)
}

// probeGPUs reads the GPUs with the command's own backend. Failing to is
// a warning, not an error: the instances are the main answer. A backend
// still opening at the time limit, or a reading still in the driver, is
// kept for the next refresh (--watch), never joined by a second call: a
// slow nvmlInit shows its GPUs once it is done.
func (g *Gatherer) probeGPUs(ctx context.Context) []api.GPU {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	if g.probe == nil && g.probeErr == nil && g.opening == nil {
		g.opening = offcall.Go(g.o.Open)
	}
	if g.opening != nil {
		select {
		case r := <-g.opening:
			g.opening, g.probe, g.probeErr = nil, r.V, r.Err
		case <-ctx.Done():
			g.warn("no GPU information: opening the GPU backend: " + noAnswer())
			return []api.GPU{}
		}
	}
	if g.probeErr != nil {
		g.warn(noGPUWarning(g.o.Backend, g.probeErr))
		return []api.GPU{}
	}
	if g.reading != nil {
		select {
		case <-g.reading: // the abandoned reading ended; its result is stale
			g.reading = nil
		default:
			g.warn("reading GPUs: the previous reading is still inside the driver (is it hung?)")
			return []api.GPU{}
		}
	}
	reading := offcall.Go(func() (gpu.Sample, error) { return g.probe.Sample(ctx) })
	select {
	case r := <-reading:
		if r.Err != nil {
			g.warn(fmt.Sprintf("reading GPUs: %v", r.Err))
			return []api.GPU{}
		}
		return GPUs(r.V)
	case <-ctx.Done():
		g.reading = reading
		g.warn("reading GPUs: " + noAnswer())
		return []api.GPU{}
	}
}

// GPUs converts a probe sample to the status object's GPUs.
func GPUs(s gpu.Sample) []api.GPU {
	out := make([]api.GPU, 0, len(s.Devices))
	for _, d := range s.Devices {
		g := api.GPU{Index: d.Index, UUID: d.UUID, Name: d.Name, UsedBytes: d.Used, TotalBytes: d.Total}
		for _, p := range s.Processes {
			if p.Device == d.Index {
				g.Processes = append(g.Processes, api.GPUProcess{PID: p.PID, UsedBytes: p.Used})
			}
		}
		out = append(out, g)
	}
	return out
}

// Close closes the backend unless a reading is still inside it:
// probes need not be safe for a Close during a Sample, and the process is
// about to exit anyway.
func (g *Gatherer) Close() {
	if g.probe == nil {
		return
	}
	if g.reading != nil {
		select {
		case <-g.reading:
		default:
			return
		}
	}
	if err := g.probe.Close(); err != nil {
		g.warn(err.Error())
	}
}

// noGPUWarning is the warning for a backend that could not be opened. On a
// host without a GPU, auto's error names every library path and sysfs file
// it tried (over a thousand characters), and every plain `status` printed
// it with its one useful hint at the end: the hint comes first now, on
// one line, and the details are one flag away.
func noGPUWarning(backend string, err error) string {
	if (backend == "" || backend == backends.Auto) && errors.Is(err, gpu.ErrUnavailable) {
		return "use --backend sim for the simulated GPU: no GPU found here (--backend nvml or --backend drm says what was looked for)"
	}
	return fmt.Sprintf("no GPU information: %v", err)
}
