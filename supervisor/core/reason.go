package core

import (
	"fmt"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// Reason is why a step (or a restart) happened: the one vocabulary from
// the decision to the journal, the metrics and the text. Its values are
// the journal's and the metrics' reason strings (api.Reason*); Kind gives
// the word the shared-GPU messages use for the same step (api.Kind*).
type Reason string

// The reasons of steps the rules decide, and of requested ones.
const (
	Watermark Reason = api.ReasonWatermark // above high for sustain: one profile lower
	Predicted Reason = api.ReasonPredicted // critical projected within lead: one lower, before high
	Critical  Reason = api.ReasonCritical  // still critical after grace: restart one lower
	Recovered Reason = api.ReasonRecovered // below low for recover_after: one profile higher
	Manual    Reason = api.ReasonManual    // `gpuguard step`
)

// Kind is the shared-GPU decision kind of a step for r: what a proposal
// and a tenant decision carry on the wire. "" for a reason no tenant
// proposes.
func (r Reason) Kind() string {
	switch r {
	case Watermark:
		return api.KindDown
	case Predicted:
		return api.KindPredicted
	case Critical:
		return api.KindCritical
	case Recovered:
		return api.KindUp
	}
	return ""
}

// ReasonOfKind is the reason of a step of shared-GPU decision kind kind
// (the inverse of Kind); an unknown kind is a plain watermark step down.
func ReasonOfKind(kind string) Reason {
	switch kind {
	case api.KindCritical:
		return Critical
	case api.KindPredicted:
		return Predicted
	case api.KindUp:
		return Recovered
	}
	return Watermark
}

// Up reports whether r steps up the ladder (towards profile 0).
func (r Reason) Up() bool { return r == Recovered }

// Text says what a step for r does, for people.
func (r Reason) Text() string {
	switch r {
	case Critical:
		return "critical restart one profile lower"
	case Predicted:
		return "predicted step down"
	case Recovered:
		return "step up"
	}
	return "step down"
}

// Why is the detail of a step for r decided by the instance's own rules:
// the figures that made it, as the journal's detail says them.
func (r Reason) Why(ratio float64, wm policy.Watermark, eta float64) string {
	switch r {
	case Critical:
		return fmt.Sprintf("watermark %.2f >= critical %.2f %s after a step", ratio, wm.Critical, wm.Grace)
	case Recovered:
		return fmt.Sprintf("watermark %.2f < %.2f for %s", ratio, wm.Low, wm.RecoverAfter)
	case Predicted:
		return fmt.Sprintf("watermark %.2f rising: critical %.2f in %.1fs (lead %s)", ratio, wm.Critical, eta, wm.Lead)
	}
	return fmt.Sprintf("watermark %.2f > %.2f", ratio, wm.High)
}

// Why a launch happens, beside the reasons of the steps (a restart
// gpuguard began for a step carries the step's: watermark, critical,
// manual, request, reload, ...) and of the exits the restart rules meet
// (oom, crash, gpu_fault: ExitKind's words). One value from the decision
// to the launch's line, its fit and start events and the state file.
const (
	FirstStart  Reason = "start"  // the run's first start
	NotifyDeath Reason = "notify" // the notify signal of a live change killed the child
)
