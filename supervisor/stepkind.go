package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// A step of a kind (api.Kind*: down, predicted, critical, up), whoever
// decided it: this instance's own rules, or the tenants of a shared GPU
// (sharedState hands its decisions to the core as core.Peer). Nothing here
// is shared-GPU code, so a lone instance's step never enters it.

// proposalKind maps a watermark verdict to the decision it proposes; ""
// for none.
func proposalKind(v core.Verdict) string { return v.Reason().Kind() }

// worstGPU is the UUID of the GPU whose used/limit is highest: the one that
// crossed.
func worstGPU(devs []gpu.Device, pol *policy.Policy) string {
	best, worst := "", -1.0
	for _, d := range devs {
		if lim := pol.Limit(d.Total); lim > 0 {
			if r := float64(d.Used) / float64(lim); r > worst {
				best, worst = d.UUID, r
			}
		}
	}
	return best
}

// predicted says whether the trend asks for a predicted step. A server's
// own start-up (weights, cache, CUDA graphs) is growth toward its budget,
// not toward an OOM: no predicted step until its child (started at since)
// has run for grace, the time a step is given to take effect.
func (p *pacer) predicted(now, since time.Time, grace time.Duration) bool {
	return p.fc.Predicted && now.Sub(since) >= grace
}

func kindReason(kind string) string { return string(core.ReasonOfKind(kind)) }

func kindText(kind string) string { return core.ReasonOfKind(kind).Text() }
