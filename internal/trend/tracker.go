package trend

import "time"

// Tracker holds one watermark's recent samples and when it last rose.
// Its zero value is ready; it does not allocate after that.
type Tracker struct {
	w Window
	// lastRise is the newest sample at which the short trend rose, or the
	// ratio jumped, or there was no trend yet (which cannot vouch for calm).
	lastRise time.Time
	prev     float64 // the ratio of the sample before
}

// Observe records a sample and forecasts from every sample so far.
func (t *Tracker) Observe(at time.Time, ratio float64, s Settings) Forecast {
	t.w.Add(at, ratio)
	short, long := t.w.Recent(ShortSpan), t.w.Over(LongSpan)
	jumped := t.w.Len() > 1 && ratio-t.prev >= JumpStep
	if !short.Valid() || short.Rising() || jumped || t.lastRise.IsZero() {
		t.lastRise = at
	}
	t.prev = ratio
	calm := ratio < s.Low && at.Sub(t.lastRise) >= CalmAfter
	f := Forecast{Period: Period(s, ratio, short, calm), Predicted: Predicts(s, ratio, short, long)}
	if stillRising(short, long) {
		f.ETA, f.Rising = ETA(s.Critical, ratio, long)
	}
	return f
}

// Reset forgets every sample: the next child's memory starts a new trend.
func (t *Tracker) Reset() {
	t.w.Reset()
	t.lastRise = time.Time{}
}
