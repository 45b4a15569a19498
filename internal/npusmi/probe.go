package npusmi

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
)

// Options configures the npu-smi (Huawei Ascend) backend.
type Options struct {
	// Command is the npu-smi executable (default "npu-smi", found in PATH).
	Command string
	// Select lists the watched NPUs by gpu.Device.Index or UUID ("NPU-0-0");
	// nil watches all.
	Select []string
}

// Probe is the Ascend backend: every Sample runs `npu-smi info` and parses
// its table, so per-process usage is as fresh as device memory. npu-smi
// is a separate process and can take a noticeable fraction of a second:
// prefer an interval of at least 500ms with it.
type Probe struct {
	cmd string
	sel []string
}

// Open finds npu-smi and runs it once to check the selection. A
// missing npu-smi, or one that fails, wraps gpu.ErrUnavailable.
func Open(ctx context.Context, o Options) (*Probe, error) {
	name := o.Command
	if name == "" {
		name = "npu-smi"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%w: npu-smi: %s not found in PATH (is the Ascend driver installed?); use --backend sim to run without an accelerator", gpu.ErrUnavailable, name)
	}
	n := &Probe{cmd: path, sel: o.Select}
	t, err := n.info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", gpu.ErrUnavailable, err)
	}
	for _, s := range o.Select {
		if !slices.ContainsFunc(t.Devices, func(d gpu.Device) bool { return npuMatch(d, s) }) {
			return nil, fmt.Errorf("npu-smi: device %q: no such NPU", s)
		}
	}
	return n, nil
}

func npuMatch(d gpu.Device, sel string) bool {
	return sel == d.UUID || sel == strconv.Itoa(d.Index)
}

// info runs and parses `npu-smi info`.
func (n *Probe) info(ctx context.Context) (npuTable, error) {
	c := exec.CommandContext(ctx, n.cmd, "info")
	c.WaitDelay = time.Second // a helper it leaves behind must not hold the pipe open
	out, err := c.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return npuTable{}, fmt.Errorf("npu-smi info: %w: %s", err, ee.Stderr)
		}
		return npuTable{}, fmt.Errorf("npu-smi info: %w", err)
	}
	return parseNPUSMI(string(out))
}

// Interruptible says that Sample honours ctx's deadline: the command is
// killed then (gpu.Interruptible).
func (n *Probe) Interruptible() bool { return true }

// Sample runs `npu-smi info` under ctx (a hung npu-smi is killed at the
// deadline) and keeps the selected NPUs in the order selected.
func (n *Probe) Sample(ctx context.Context) (gpu.Sample, error) {
	now := time.Now()
	t, err := n.info(ctx)
	if err != nil {
		return gpu.Sample{}, err
	}
	smp := gpu.Sample{Time: now, ProcessesAt: now}
	if len(n.sel) == 0 {
		smp.Devices = t.Devices
	}
	for _, s := range n.sel {
		i := slices.IndexFunc(t.Devices, func(d gpu.Device) bool { return npuMatch(d, s) })
		if i < 0 {
			return gpu.Sample{}, fmt.Errorf("npu-smi: NPU %q: %w", s, gpu.ErrGPULost)
		}
		smp.Devices = append(smp.Devices, t.Devices[i])
	}
	for _, p := range t.Processes {
		if slices.ContainsFunc(smp.Devices, func(d gpu.Device) bool { return d.Index == p.Device }) {
			smp.Processes = append(smp.Processes, p)
		}
	}
	return smp, nil
}

// Close does nothing: a Probe holds no resources between samples.
func (n *Probe) Close() error { return nil }
