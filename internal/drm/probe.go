package drm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/gpu"
)

// DefaultProcessInterval is how often per-process usage is refreshed when
// Options.ProcessInterval is 0: scanning every process's file descriptors
// costs far more than reading device memory.
const DefaultProcessInterval = time.Second

// Options configures Open.
type Options struct {
	// Sysfs and Procfs are where sysfs and procfs are mounted ("" = /sys
	// and /proc; GPUGUARD_SYSFS and GPUGUARD_PROCFS).
	Sysfs, Procfs string
	// Devices selects the watched GPUs (see resolve); nil watches every
	// device with memory counters.
	Devices []string
	// ProcessInterval is the least time between per-process refreshes.
	ProcessInterval time.Duration
	// Devfs is where devtmpfs is mounted ("" = /dev), for Intel render
	// nodes.
	Devfs string

	openVRAM vramOpener // tests: Intel memory sources (nil: the ioctl one)
}

// device is one watched GPU.
type device struct {
	gpu.Device // Used is read per Sample
	// used is the amdgpu mem_info_vram_used file; src, for an Intel GPU,
	// the driver's memory query.
	used string
	src  vramSource
}

// readUsed reads the device's used memory. A counter file that is gone, or
// a render node that answers ENODEV, is a GPU that fell off the bus.
func (d device) readUsed() (uint64, error) {
	if d.src != nil {
		v, err := d.src.read()
		if errors.Is(err, unix.ENODEV) {
			return 0, fmt.Errorf("its render node answers %v: %w", err, gpu.ErrGPULost)
		}
		return v.used, err
	}
	used, err := readUint(d.used)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%s is gone: %w", d.used, gpu.ErrGPULost)
	}
	return used, err
}

// Probe is the DRM gpu.Probe. Not safe for concurrent use: the supervisor
// samples from one goroutine at a time.
type Probe struct {
	devices  []device
	scanner  *scanner
	interval time.Duration

	procs   []gpu.Process
	procsAt time.Time
}

// Open finds the DRM devices, orders them as ROCm does and resolves the
// selection. No device with memory counters wraps gpu.ErrUnavailable and
// names every device found and why it cannot be watched; a selection
// entry that names no usable GPU is a plain error.
func Open(o Options) (*Probe, error) {
	sysfs, procfs, devfs := o.Sysfs, o.Procfs, o.Devfs
	if sysfs == "" {
		sysfs = "/sys"
	}
	if procfs == "" {
		procfs = "/proc"
	}
	if devfs == "" {
		devfs = "/dev"
	}
	intel := &intelCheck{devfs: devfs, procfs: procfs, open: o.openVRAM}
	if intel.open == nil {
		intel.open = openRenderNode
	}
	cards, err := scanCards(sysfs)
	if err != nil {
		return nil, fmt.Errorf("%w: DRM: listing %s: %v", gpu.ErrUnavailable, filepath.Join(sysfs, "class", "drm"), err)
	}
	nodes, err := readTopology(sysfs)
	if err != nil {
		return nil, fmt.Errorf("DRM: %w", err)
	}
	var usable, others []card
	var srcs []vramSource // usable's Intel memory sources, by index
	defer func() {
		for _, src := range srcs { // those the probe did not take
			if src != nil {
				src.Close()
			}
		}
	}()
	for _, c := range order(cards, nodes) {
		var src vramSource
		if c.intel() {
			src = intel.check(&c)
		}
		if c.why == "" {
			usable = append(usable, c)
			srcs = append(srcs, src)
		} else {
			others = append(others, c)
		}
	}
	if len(usable) == 0 {
		return nil, unavailable(sysfs, others)
	}
	sel := o.Devices
	if len(sel) == 0 {
		for i := range usable {
			sel = append(sel, fmt.Sprint(i))
		}
	}
	p := &Probe{interval: o.ProcessInterval}
	if p.interval <= 0 {
		p.interval = DefaultProcessInterval
	}
	byPCI, byGPUID := map[string]int{}, map[uint32]int{}
	for _, e := range sel {
		i, err := resolve(e, usable, others)
		if err != nil {
			p.Close()
			return nil, err
		}
		c := usable[i]
		if _, dup := byPCI[c.pci]; dup {
			p.Close()
			return nil, fmt.Errorf("DRM: device %q: GPU %s is listed twice", e, c.uuid)
		}
		byPCI[c.pci] = i
		if c.gpuID != 0 {
			byGPUID[c.gpuID] = i
		}
		d := device{Device: gpu.Device{Index: i, UUID: c.uuid, Name: c.name, Total: c.total}, src: srcs[i]}
		if d.src == nil {
			d.used = filepath.Join(c.dir, "mem_info_vram_used")
		}
		srcs[i] = nil // the probe's now
		p.devices = append(p.devices, d)
	}
	p.scanner = newScanner(procfs, sysfs, byPCI, byGPUID)
	return p, nil
}

// unavailable explains why no device can be watched.
func unavailable(sysfs string, others []card) error {
	found := ""
	if len(others) > 0 {
		var s []string
		for _, c := range others {
			s = append(s, fmt.Sprintf("%s (%s at %s): %s", c.node, c.name, c.pci, c.why))
		}
		found = "; found: " + strings.Join(s, "; ")
	}
	return fmt.Errorf("%w: DRM: no AMD or Intel GPU with memory counters under %s%s",
		gpu.ErrUnavailable, filepath.Join(sysfs, "class", "drm"), found)
}

// Sample reads every watched device's used VRAM and, once per interval,
// the processes on them. A device whose sysfs directory is gone (unbound,
// fell off the bus) fails the sample with gpu.ErrGPULost. The returned
// Processes slice is shared between samples: do not modify it.
func (p *Probe) Sample(ctx context.Context) (gpu.Sample, error) {
	now := time.Now()
	smp := gpu.Sample{Time: now, Devices: make([]gpu.Device, 0, len(p.devices))}
	for _, d := range p.devices {
		if err := ctx.Err(); err != nil {
			return gpu.Sample{}, fmt.Errorf("DRM: sampling GPU %d: %w", d.Index, err)
		}
		used, err := d.readUsed()
		if err != nil {
			return gpu.Sample{}, fmt.Errorf("DRM: GPU %d (%s): %w", d.Index, d.UUID, err)
		}
		dev := d.Device
		dev.Used = used
		smp.Devices = append(smp.Devices, dev)
	}
	if p.procsAt.IsZero() || now.Sub(p.procsAt) >= p.interval {
		procs, err := p.scanner.scan(ctx)
		if err != nil {
			return gpu.Sample{}, fmt.Errorf("DRM: listing processes: %w", err)
		}
		p.procs, p.procsAt = procs, now
	}
	smp.Processes, smp.ProcessesAt = p.procs, p.procsAt
	return smp, nil
}

// Close closes the Intel GPUs' render nodes (amdgpu's counters are files
// opened per sample).
func (p *Probe) Close() error {
	var errs []error
	for _, d := range p.devices {
		if d.src != nil {
			errs = append(errs, d.src.Close())
		}
	}
	return errors.Join(errs...)
}
