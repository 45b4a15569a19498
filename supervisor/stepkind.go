package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// A step of a kind (api.Kind*: down, predicted, critical, up), whoever
// decided it: this instance's own rules, or the tenants of a shared GPU
// (sharedState hands its decisions to stepKind). This is the decision
// core's entry point for a peer's verdict; nothing here is shared-GPU code,
// so a lone instance's step never enters it.

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

// stepKind performs a decision of kind here, as the watermark rules of a
// lone instance do. The caller has checked that the ladder allows it.
func (l *loop) stepKind(now time.Time, kind, why string) {
	l.doAll(l.decide(core.Peer{Now: now, Reason: core.ReasonOfKind(kind), Why: why, Ratio: l.latest.ratio}), nil)
}

// criticalNobody is the rate-limited `critical` event when the watermark
// is at or above critical and no tenant (on a GPU of our own: not we) can
// step lower.
func (l *loop) criticalNobody(now time.Time, gpu string, shared bool) {
	wm := l.pol.Watermark
	if !l.core.Rules.FloorAlarm(now, l.latest.ratio, wm) {
		return
	}
	detail := fmt.Sprintf("watermark %.2f >= critical %.2f at the last profile; nothing lower to step to", l.latest.ratio, wm.Critical)
	if shared {
		detail = fmt.Sprintf("watermark %.2f >= critical %.2f and no tenant of shared GPU %s can step lower", l.latest.ratio, wm.Critical, gpu)
	}
	l.emit(api.Event{Event: api.EventCritical, Watermark: l.latest.ratio, GPU: gpu, Detail: detail})
	l.deps.Logf("%s", detail)
}

// predicted says whether the trend asks for a predicted step. A server's
// own start-up (weights, cache, CUDA graphs) is growth toward its budget,
// not toward an OOM: no predicted step until it has run for grace, the time
// a step is given to take effect.
func (l *loop) predicted(now time.Time) bool {
	return l.pace.fc.Predicted && now.Sub(l.life.run.childStart) >= l.pol.Watermark.Grace
}

// whyKind is the detail of a step decided by our own rules alone.
func (l *loop) whyKind(kind string) string {
	return core.ReasonOfKind(kind).Why(l.latest.ratio, l.pol.Watermark, l.pace.fc.ETA.Seconds())
}

func kindReason(kind string) string { return string(core.ReasonOfKind(kind)) }

func kindText(kind string) string { return core.ReasonOfKind(kind).Text() }
