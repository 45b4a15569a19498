package trend

import (
	"math"
	"time"
)

// Settings are the policy values the rules read ([watch] and [watermark]).
type Settings struct {
	Adaptive                           bool
	Interval, MinInterval, MaxInterval time.Duration
	High, Critical, Low                float64
	Lead                               time.Duration
}

// Forecast is what the trend says after one sample.
type Forecast struct {
	// Period is when the next sample is due, counted from this one.
	Period time.Duration
	// Rising says the 10 s trend rises and the newest second still rises
	// with it; ETA is then the projected time until the watermark reaches
	// critical (0 when it is already there).
	Rising bool
	ETA    time.Duration
	// Predicted says the trend stands out and reaches critical within
	// the lead, with the watermark at or above low: the predicted
	// step-down's condition, which the caller must see hold for sustain.
	Predicted bool
}

// Period is the adaptive polling rule. With adaptive polling off it is
// always the interval. While the short trend rises, it leaves time for 4
// samples before the trend reaches high: (high - ratio) / slope / 4,
// within [min_interval, interval] (at or above high, min_interval). Calm
// (below low, not risen for CalmAfter) polls every max_interval; anything
// else, including no trend yet, every interval.
func Period(s Settings, ratio float64, short Line, calm bool) time.Duration {
	switch {
	case !s.Adaptive:
		return s.Interval
	case short.Rising():
		secs := (s.High - ratio) / short.Slope / 4
		if secs >= s.Interval.Seconds() {
			return s.Interval
		}
		return max(time.Duration(secs*float64(time.Second)), s.MinInterval)
	case calm:
		return s.MaxInterval
	}
	return s.Interval
}

// ETA is the time until the watermark, now at ratio, reaches critical at
// the slope of the long trend; false when that trend does not rise.
// It counts from the newest sample, not from the fitted line, so a level
// shift inside the window does not move it.
func ETA(critical, ratio float64, long Line) (time.Duration, bool) {
	if !long.Rising() {
		return 0, false
	}
	if ratio >= critical {
		return 0, true
	}
	secs := (critical - ratio) / long.Slope
	return time.Duration(math.Min(secs, maxETA.Seconds()) * float64(time.Second)), true
}

// maxETA caps projections so far out that they mean "not soon" (and would
// overflow a Duration).
const maxETA = 1000 * time.Hour

// Predicts is the predicted step-down's condition for one sample: lead is
// set, the watermark is at or above low, the long trend stands out from
// its scatter, the newest second still rises with it, and it reaches
// critical within lead. The check on the newest second keeps a jump to a
// plateau (a server allocating its cache in one go) from passing for a
// ramp: a line through a step slopes up, but the samples after the step
// are flat.
func Predicts(s Settings, ratio float64, short, long Line) bool {
	if s.Lead <= 0 || ratio < s.Low || !long.StandsOut() || !short.Valid() {
		return false
	}
	if !stillRising(short, long) {
		return false
	}
	eta, ok := ETA(s.Critical, ratio, long)
	return ok && eta <= s.Lead
}

// stillRising reports whether the newest second still rises with the long
// trend: its slope is not clearly below half the long one. A jump to a
// plateau makes the 10 s line slope up for 10 s while the samples after the
// jump are flat; neither a prediction nor an ETA should come of it.
func stillRising(short, long Line) bool {
	return !short.Valid() || short.Slope+risingT*short.SlopeErr >= long.Slope/2
}
