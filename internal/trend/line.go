package trend

import "time"

// The thresholds of the contract ("Sensing" in CONTRACT.md) and the
// estimator's own.
const (
	// MinSamples and MinSpan make a trend: fewer samples, or samples
	// closer together, give none.
	MinSamples = 5
	MinSpan    = time.Second
	// ShortSpan is the period rule's trend: about the last second.
	ShortSpan = time.Second
	// LongSpan is the prediction's trend: the last 10 s.
	LongSpan = 10 * time.Second
	// PredictSpan is how long a trend must stand out before it may cause
	// a predicted step.
	PredictSpan = 5 * time.Second
	// CalmAfter is how long the watermark must not have risen (below
	// low) before the period lengthens to max_interval.
	CalmAfter = 5 * time.Second
	// JumpStep is a rise from one sample to the next that ends calm at
	// once, before the trend (which needs several samples to clear its
	// noise test) shows it: 5 % of the GPU, which ±2 % noise never makes.
	JumpStep = 0.05

	// MinSlope (ratio per second) is the least rise that counts: 0.1 % of
	// the GPU a second would take over 10 minutes to climb from low to
	// high at the defaults. Slower drifts, and float noise, are flat.
	MinSlope = 0.001
	// risingT is how many standard errors a slope must clear to count as
	// rising (the period rule, eta_seconds): about 97.5 % one-sided.
	risingT = 2
	// predictT and predictRise are the stricter tests of a predicted
	// step: the slope clears predictT standard errors, and the rise it
	// makes across its window is at least predictRise times the samples'
	// scatter around the line, so a trend that noise or a sawtooth could
	// draw is never taken for one.
	predictT    = 4
	predictRise = 4
)

// Line is a least-squares fit of the watermark against time.
type Line struct {
	N    int           // samples in the fit
	Span time.Duration // from the oldest to the newest of them
	// Slope is the trend in ratio per second.
	Slope float64
	// Level is the fitted ratio at the newest sample's time.
	Level float64
	// SlopeErr is the slope's standard error; Scatter the standard
	// deviation of the samples around the line. Both are 0 for a perfect
	// fit (or fewer than 3 samples).
	SlopeErr float64
	Scatter  float64
}

// Valid reports whether the samples make a trend at all: at least
// MinSamples spanning at least MinSpan.
func (l Line) Valid() bool { return l.N >= MinSamples && l.Span >= MinSpan }

// Rising reports whether the watermark rises: a valid trend whose slope is
// above MinSlope and clears its standard error risingT times.
func (l Line) Rising() bool {
	return l.Valid() && l.Slope > MinSlope && l.Slope > risingT*l.SlopeErr
}

// StandsOut reports whether the rise is a trend that may predict a step:
// rising over at least PredictSpan, by predictT standard errors, and by a
// total rise across the window of predictRise times the scatter.
func (l Line) StandsOut() bool {
	return l.Rising() && l.Span >= PredictSpan && l.Slope >= predictT*l.SlopeErr &&
		l.Slope*l.Span.Seconds() >= predictRise*l.Scatter
}
