package drm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/drm/drmtest"
)

// benchProbe is a fake tree of 8 MI300X-like GPUs (in the KFD topology)
// with 64 processes, 8 on each GPU, each holding two DRM fds (one client
// dup'ed) besides stdin.
func benchProbe(b *testing.B, interval time.Duration) *Probe {
	sys, procfs := b.TempDir(), b.TempDir()
	var gpus []drmtest.GPU
	for i := range 8 {
		gpus = append(gpus, drmtest.GPU{Card: i, PCI: fmt.Sprintf("0000:%02x:00.0", 0x10+i), Name: "AMD Instinct MI300X",
			Total: 192 << 30, Used: 64 << 30, UniqueID: uint64(0x5b3e0000 + i), GPUID: uint32(1000 + i)})
	}
	if err := drmtest.WriteSysfs(sys, gpus); err != nil {
		b.Fatal(err)
	}
	for i := range 64 {
		g := gpus[i%8]
		c := drmtest.Client{FD: 5, PDev: g.PCI, ID: fmt.Sprint(i), VRAM: "8388608 KiB"}
		dup := c
		dup.FD = 6
		if err := drmtest.WriteProc(procfs, 1000+i, []drmtest.Client{c, dup}); err != nil {
			b.Fatal(err)
		}
	}
	p, err := Open(Options{Sysfs: sys, Procfs: procfs, ProcessInterval: interval})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func benchTick(b *testing.B, p *Probe) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Sample(ctx)
		if err != nil || len(s.Devices) != 8 || len(s.Processes) != 64 {
			b.Fatalf("Sample: %d devices, %d processes, %v", len(s.Devices), len(s.Processes), err)
		}
	}
}

// BenchmarkDRMProbeTick is one Sample of 8 GPUs / 64 processes on a fake
// tree: the usual tick (processes cached, refreshed once a second) and a
// tick that rescans every process.
func BenchmarkDRMProbeTick(b *testing.B) {
	b.Run("cached", func(b *testing.B) { benchTick(b, benchProbe(b, time.Hour)) })
	b.Run("refresh", func(b *testing.B) { benchTick(b, benchProbe(b, time.Nanosecond)) })
}
