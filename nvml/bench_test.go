//go:build cgo

package nvml

import (
	"context"
	"testing"
	"time"
)

// benchProbe is 8 fake H200s with 8 processes each.
func benchProbe(b *testing.B, interval time.Duration) *probe {
	srv := newH200()
	for i, d := range srv.Devices {
		for j := range 8 {
			d.addProc(uint32(1000+8*i+j), 4<<30)
		}
	}
	return mustOpen(b, Options{Lib: srv, ProcessInterval: interval})
}

func benchTick(b *testing.B, p *probe) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Sample(ctx)
		if err != nil || len(s.Processes) != 64 {
			b.Fatalf("Sample: %d processes, %v", len(s.Processes), err)
		}
	}
}

// BenchmarkProbeTick is one Sample of 8 GPUs / 64 processes: with the
// process list cached (the usual tick) and refreshed on every tick.
func BenchmarkProbeTick(b *testing.B) {
	b.Run("cached", func(b *testing.B) { benchTick(b, benchProbe(b, time.Hour)) })
	b.Run("refresh", func(b *testing.B) { benchTick(b, benchProbe(b, time.Nanosecond)) })
}
