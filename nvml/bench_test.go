//go:build cgo

package nvml

import (
	"context"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// benchProbe is go-nvml's mock DGX H200 (8 GPUs) with 8 processes of
// 4 GiB on each: 64 in all.
func benchProbe(b *testing.B, interval time.Duration) *probe {
	srv := newH200()
	for i := range srv.Devices {
		var procs []gonvml.ProcessInfo
		for j := range 8 {
			procs = append(procs, gonvml.ProcessInfo{Pid: uint32(1000 + 8*i + j), UsedGpuMemory: 4 << 30})
		}
		setProcs(dev(srv, i), procs...)
		setUsed(dev(srv, i), 32<<30)
	}
	return mustOpen(b, Options{Lib: srv, ProcessInterval: interval})
}

func benchTick(b *testing.B, p *probe) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Sample(ctx)
		if err != nil || len(s.Devices) != 8 || len(s.Processes) != 64 {
			b.Fatalf("Sample: %d devices, %d processes, %v", len(s.Devices), len(s.Processes), err)
		}
	}
}

// BenchmarkProbeTick is one Sample of 8 mocked H200s / 64 processes: with
// the process list cached (the usual tick) and refreshed on every tick.
func BenchmarkProbeTick(b *testing.B) {
	b.Run("cached", func(b *testing.B) { benchTick(b, benchProbe(b, time.Hour)) })
	b.Run("refresh", func(b *testing.B) { benchTick(b, benchProbe(b, time.Nanosecond)) })
}
