package admission

import (
	"fmt"
	"math"

	"github.com/gpuguard/gpuguard/internal/saturate"
	"github.com/gpuguard/gpuguard/policy"
)

// fit is the arithmetic for the fullest GPU, kept so the reason can show
// its numbers.
type fit struct {
	used, leased, bytes, limit uint64
	high                       float64
	fits                       bool
}

// worst returns the GPU that comes closest to (or goes furthest past) its
// threshold once the leases and the request are added. All GPUs fit iff
// the worst one does.
func worst(gpus []GPUUsage, leased, bytes uint64, high float64) fit {
	var w fit
	wRatio := math.Inf(-1)
	for i, g := range gpus {
		f := fit{used: g.Used, leased: saturate.Add(leased, g.Leased), bytes: bytes, limit: g.Limit, high: high}
		after := float64(f.after())
		threshold := f.threshold()
		f.fits = after <= threshold
		ratio := math.Inf(1)
		if threshold > 0 {
			ratio = after / threshold
		}
		if i == 0 || ratio > wRatio {
			w, wRatio = f, ratio
		}
	}
	return w
}

func (f fit) after() uint64 { return saturate.Add(saturate.Add(f.used, f.leased), f.bytes) }

// threshold is Limit × high in bytes; float64 is exact far beyond any GPU.
func (f fit) threshold() float64 { return float64(f.limit) * f.high }

// text renders the comparison, e.g. "30 GiB used + 2 GiB leased + 4 GiB
// requested = 36 GiB <= 36 GiB (0.90 × 40 GiB) on the fullest GPU".
func (f fit) text(op string) string {
	return fmt.Sprintf("%s used + %s leased + %s requested = %s %s %s (%.2f × %s) on the fullest watched GPU",
		policy.FormatSize(f.used), policy.FormatSize(f.leased), policy.FormatSize(f.bytes), policy.FormatSize(f.after()),
		op, policy.FormatSize(uint64(math.Min(f.threshold(), math.MaxUint64))), f.high, policy.FormatSize(f.limit))
}
