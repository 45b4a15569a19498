package trend

import (
	"math"
	"time"
)

// Capacity is how many samples a Window holds. At the default 20 ms
// min_interval, 10 s of samples are 500; faster polling is thinned (see
// Add), so the ring always covers the 10 s the prediction looks at.
const Capacity = 1024

// minGap is the least time Add keeps between a stored sample and the one
// two places before it, so that Capacity samples always span LongSpan:
// polling faster than every minGap/2 (about 10 ms) is thinned.
const minGap = LongSpan / (Capacity/2 - 2)

// Window is a fixed ring of the newest (time, ratio) samples. Its zero
// value is empty and ready to use; it never allocates.
type Window struct {
	base time.Time         // the time offsets count from
	at   [Capacity]int64   // nanoseconds since base, ascending
	v    [Capacity]float64 // ratios
	head int               // index of the oldest sample
	n    int
}

// Add appends a sample. A sample closer than minGap to the one before the
// newest replaces the newest instead, so the newest value is always fresh
// while older samples stay spread over the window. A time before the newest
// sample's (a clock step) is taken as the newest's.
func (w *Window) Add(at time.Time, v float64) {
	if w.n == 0 {
		w.base = at
	}
	off := int64(at.Sub(w.base))
	if w.n > 0 {
		off = max(off, w.at[w.idx(0)])
	}
	if w.n >= 1 && off == w.at[w.idx(0)] || w.n >= 2 && time.Duration(off-w.at[w.idx(1)]) < minGap {
		i := w.idx(0)
		w.at[i], w.v[i] = off, v
		return
	}
	if w.n == Capacity {
		w.head = (w.head + 1) % Capacity
		w.n--
	}
	i := (w.head + w.n) % Capacity
	w.at[i], w.v[i] = off, v
	w.n++
}

// Len is the number of samples held.
func (w *Window) Len() int { return w.n }

// Reset empties the window.
func (w *Window) Reset() { w.head, w.n = 0, 0 }

// idx is the ring index of the k-th newest sample (0 = newest).
func (w *Window) idx(k int) int { return (w.head + w.n - 1 - k) % Capacity }

// Recent fits the shortest run of newest samples that makes a trend:
// MinSamples of them spanning at least span, none older than LongSpan
// before the newest. The period rule uses it with span = ShortSpan.
func (w *Window) Recent(span time.Duration) Line {
	k := w.count(LongSpan, span)
	return w.fit(k)
}

// Over fits every sample no older than age before the newest one.
func (w *Window) Over(age time.Duration) Line {
	return w.fit(w.count(age, -1))
}

// count is how many newest samples lie within maxAge of the newest,
// stopping early once there are MinSamples spanning at least stop (never
// when stop < 0).
func (w *Window) count(maxAge, stop time.Duration) int {
	if w.n == 0 {
		return 0
	}
	newest := w.at[w.idx(0)]
	k := 0
	for ; k < w.n; k++ {
		age := time.Duration(newest - w.at[w.idx(k)])
		if age > maxAge {
			break
		}
		if stop >= 0 && k+1 >= MinSamples && age >= stop {
			return k + 1
		}
	}
	return k
}

// fit is the least-squares line through the k newest samples, with time in
// seconds relative to the newest. Two passes (means, then deviations) keep
// it exact when the ratios barely move.
func (w *Window) fit(k int) Line {
	if k < 2 {
		return Line{N: k}
	}
	newest := w.at[w.idx(0)]
	x := func(j int) float64 { return float64(w.at[w.idx(j)]-newest) / 1e9 }
	var sx, sy float64
	for j := range k {
		sx += x(j)
		sy += w.v[w.idx(j)]
	}
	n := float64(k)
	mx, my := sx/n, sy/n
	var sxx, sxy, syy float64
	for j := range k {
		dx, dy := x(j)-mx, w.v[w.idx(j)]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	l := Line{N: k, Span: time.Duration(newest - w.at[w.idx(k-1)])}
	if sxx == 0 {
		return l
	}
	l.Slope = sxy / sxx
	l.Level = my - l.Slope*mx
	if k > 2 {
		sse := max(syy-l.Slope*sxy, 0)
		l.Scatter = math.Sqrt(sse / (n - 2))
		l.SlopeErr = l.Scatter / math.Sqrt(sxx)
	}
	return l
}
