package core

import (
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

// Verdict is what the watermark rules conclude from one sample.
type Verdict int

const (
	Hold           Verdict = iota
	StepDown               // above high for sustain: one profile lower
	RestartLower           // still >= critical `grace` after a step: restart one lower
	StepUp                 // below low for recover_after: one profile higher
	CriticalAtLast         // >= critical at the last profile: log and count
	// StepDownPredicted: at or above low, the trend has projected
	// critical within lead for sustain: one profile lower, before high.
	StepDownPredicted
)

func (v Verdict) String() string {
	switch v {
	case StepDown:
		return "step down"
	case RestartLower:
		return "restart one profile lower"
	case StepUp:
		return "step up"
	case CriticalAtLast:
		return "critical at the last profile"
	case StepDownPredicted:
		return "step down (predicted)"
	}
	return "hold"
}

// Reason is the reason of the step v asks for; "" when it asks for none
// (Hold, CriticalAtLast).
func (v Verdict) Reason() Reason {
	switch v {
	case StepDown:
		return Watermark
	case StepDownPredicted:
		return Predicted
	case RestartLower:
		return Critical
	case StepUp:
		return Recovered
	}
	return ""
}

// Rules is the pure state of the watermark rules: when the ratio
// crossed each threshold and when the last step happened. It sees only
// (time, ratio, level) so every rule is one row of a table test.
type Rules struct {
	aboveHighSince time.Time // zero: not above high
	belowLowSince  time.Time // zero: not below low
	// predictedSince: at or above low with the trend projecting critical
	// within lead (trend.Predicts) since then; zero: not so.
	predictedSince time.Time
	lastStep       time.Time // zero: no step yet
	// criticalChecked: the critical check for the last step was done.
	criticalChecked bool
	// lastFloorAlarm rate-limits CriticalAtLast to one per grace period.
	lastFloorAlarm time.Time
	// steps counts the steps recorded (Stepped) since the last Reset, so
	// that what follows one step can tell whether another came since.
	steps int
}

// Observe feeds one sample and returns the verdict. predicted says the
// trend projects critical within lead (trend.Predicts: it is false when
// lead is 0). level is the current profile's index and levels the
// ladder's length. The caller reports every step it performs (or, in
// observe mode, would have performed) through Stepped, which restarts the
// sustain timer and the grace period.
func (w *Rules) Observe(now time.Time, ratio float64, predicted bool, wm policy.Watermark, level, levels int) Verdict {
	if predicted && ratio >= wm.Low {
		if w.predictedSince.IsZero() {
			w.predictedSince = now
		}
	} else {
		w.predictedSince = time.Time{}
	}
	if ratio > wm.High {
		if w.aboveHighSince.IsZero() {
			w.aboveHighSince = now
		}
	} else {
		w.aboveHighSince = time.Time{}
	}
	if ratio < wm.Low {
		if w.belowLowSince.IsZero() {
			w.belowLowSince = now
		}
	} else {
		w.belowLowSince = time.Time{}
	}
	last := level >= levels-1
	inGrace := !w.lastStep.IsZero() && now.Sub(w.lastStep) < wm.Grace

	// The critical check happens once, at the first sample after grace.
	if !w.lastStep.IsZero() && !inGrace && !w.criticalChecked {
		w.criticalChecked = true
		if ratio >= wm.Critical && !last {
			return RestartLower
		}
	}
	if inGrace {
		return Hold
	}
	if !w.aboveHighSince.IsZero() && now.Sub(w.aboveHighSince) >= wm.Sustain {
		if !last {
			return StepDown
		}
		if w.FloorAlarm(now, ratio, wm) {
			return CriticalAtLast
		}
		return Hold
	}
	// A step before high: the same cadence, never at the last profile
	// (nothing lower, and the critical alarm there needs the level).
	if !w.predictedSince.IsZero() && now.Sub(w.predictedSince) >= wm.Sustain && !last {
		return StepDownPredicted
	}
	if wm.RecoverAfter > 0 && level > 0 && !w.belowLowSince.IsZero() && now.Sub(w.belowLowSince) >= wm.RecoverAfter {
		return StepUp
	}
	return Hold
}

// Stepped records a step at now (taken, or only logged in observe mode):
// the sustain and recovery timers restart and the grace period begins.
func (w *Rules) Stepped(now time.Time) {
	w.steps++
	w.lastStep = now
	w.criticalChecked = false
	w.aboveHighSince = time.Time{}
	w.belowLowSince = time.Time{}
	w.predictedSince = time.Time{}
}

// Gap records a missing sample: the ratio was not seen, so neither "above
// high since" nor "below low since" can be vouched for, and a step needs
// `sustain` (or `recover_after`) of fresh data again. The grace period
// after a step runs on: it counts from the step, not from samples.
func (w *Rules) Gap() {
	w.aboveHighSince = time.Time{}
	w.belowLowSince = time.Time{}
	w.predictedSince = time.Time{}
}

// Reset forgets everything, for a new child.
func (w *Rules) Reset() {
	*w = Rules{}
}

// StepPending reports whether a step-down is on its way: the ratio is above
// high, or a predicted step is building up, and only the sustain timer or
// the grace period holds it back. Admission refuses GPU leases meanwhile.
func (w *Rules) StepPending() bool {
	return !w.aboveHighSince.IsZero() || !w.predictedSince.IsZero()
}

// FloorAlarm reports whether a critical alarm at the last profile (or on
// a shared GPU no tenant can step lower on) is due at now, and records it
// when it is: at most one per grace period.
func (w *Rules) FloorAlarm(now time.Time, ratio float64, wm policy.Watermark) bool {
	if ratio < wm.Critical || (!w.lastFloorAlarm.IsZero() && now.Sub(w.lastFloorAlarm) < wm.Grace) {
		return false
	}
	w.lastFloorAlarm = now
	return true
}
