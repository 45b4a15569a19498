package trend

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

// fill adds v(t) sampled every step for d, starting at t0.
func fill(w *Window, step, d time.Duration, v func(sec float64) float64) time.Time {
	var at time.Time
	for x := time.Duration(0); x <= d; x += step {
		at = t0.Add(x)
		w.Add(at, v(x.Seconds()))
	}
	return at
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestFit(t *testing.T) {
	tests := []struct {
		name            string
		step, d         time.Duration
		v               func(float64) float64
		fit             func(*Window) Line
		n               int
		span            time.Duration
		slope, level    float64
		zeroErr, rising bool
	}{
		{"a line is fitted exactly", 100 * time.Millisecond, 3 * time.Second, func(s float64) float64 { return 0.5 + 0.1*s },
			func(w *Window) Line { return w.Over(LongSpan) }, 31, 3 * time.Second, 0.1, 0.8, true, true},
		{"flat is not rising", 100 * time.Millisecond, 3 * time.Second, func(float64) float64 { return 0.4 },
			func(w *Window) Line { return w.Over(LongSpan) }, 31, 3 * time.Second, 0, 0.4, true, false},
		{"falling is not rising", 100 * time.Millisecond, 3 * time.Second, func(s float64) float64 { return 0.9 - 0.05*s },
			func(w *Window) Line { return w.Over(LongSpan) }, 31, 3 * time.Second, -0.05, 0.75, true, false},
		{"the long fit keeps the last 10 s", 200 * time.Millisecond, 30 * time.Second, func(s float64) float64 { return 0.1 + 0.01*s },
			func(w *Window) Line { return w.Over(LongSpan) }, 51, 10 * time.Second, 0.01, 0.4, true, true},
		{"the short fit is the last second at 200 ms", 200 * time.Millisecond, 30 * time.Second, func(s float64) float64 { return 0.1 + 0.01*s },
			func(w *Window) Line { return w.Recent(ShortSpan) }, 6, time.Second, 0.01, 0.4, true, true},
		{"the short fit takes 5 samples when they are sparse", time.Second, 30 * time.Second, func(s float64) float64 { return 0.2 },
			func(w *Window) Line { return w.Recent(ShortSpan) }, 5, 4 * time.Second, 0, 0.2, true, false},
		{"the short fit at 20 ms", 20 * time.Millisecond, 5 * time.Second, func(s float64) float64 { return 0.3 + 0.02*s },
			func(w *Window) Line { return w.Recent(ShortSpan) }, 51, time.Second, 0.02, 0.4, true, true},
		{"a slow drift is flat", 200 * time.Millisecond, 10 * time.Second, func(s float64) float64 { return 0.3 + 0.0005*s },
			func(w *Window) Line { return w.Over(LongSpan) }, 51, 10 * time.Second, 0.0005, 0.305, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			fill(&w, tt.step, tt.d, tt.v)
			l := tt.fit(&w)
			if l.N != tt.n || l.Span != tt.span || !near(l.Slope, tt.slope, 1e-9) || !near(l.Level, tt.level, 1e-9) {
				t.Errorf("fit %+v, want n=%d span=%s slope=%g level=%g", l, tt.n, tt.span, tt.slope, tt.level)
			}
			if tt.zeroErr && (l.SlopeErr > 1e-8 || l.Scatter > 1e-8) {
				t.Errorf("a perfect fit has errors %+v", l)
			}
			if l.Rising() != tt.rising {
				t.Errorf("Rising = %v, want %v (%+v)", l.Rising(), tt.rising, l)
			}
		})
	}
}

func TestNoTrendUntilFiveSamplesOverASecond(t *testing.T) {
	rise := func(s float64) float64 { return 0.5 + 0.1*s }
	tests := []struct {
		name    string
		step, d time.Duration
		valid   bool
	}{
		{"4 samples over 3 s", time.Second, 3 * time.Second, false},
		{"10 samples over 0.9 s", 100 * time.Millisecond, 900 * time.Millisecond, false},
		{"5 samples over 1 s", 250 * time.Millisecond, time.Second, true},
		{"one sample", time.Second, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Window
			fill(&w, tt.step, tt.d, rise)
			for _, l := range []Line{w.Recent(ShortSpan), w.Over(LongSpan)} {
				if l.Valid() != tt.valid || l.Rising() != tt.valid {
					t.Errorf("%+v: valid %v rising %v, want %v", l, l.Valid(), l.Rising(), tt.valid)
				}
			}
		})
	}
}

func TestWindowThinsFastSamplesAndStaysBounded(t *testing.T) {
	var w Window
	// 1 ms polling for a minute: the ring keeps 10 s of samples at least
	// minGap apart, and the newest value is always the last one added.
	end := fill(&w, time.Millisecond, time.Minute, func(s float64) float64 { return s / 100 })
	if w.Len() > Capacity {
		t.Fatalf("%d samples held", w.Len())
	}
	l := w.Over(LongSpan)
	if l.Span < LongSpan-minGap/2 || !near(l.Level, end.Sub(t0).Seconds()/100, 1e-9) || !near(l.Slope, 0.01, 1e-9) {
		t.Fatalf("thinned window fit %+v", l)
	}
	w.Reset()
	if w.Len() != 0 || w.Over(LongSpan).N != 0 {
		t.Fatal("Reset left samples")
	}
	// A clock step backwards counts as the newest time.
	w.Add(t0, 0.1)
	w.Add(t0.Add(time.Second), 0.2)
	w.Add(t0, 0.3)
	if w.Len() != 2 {
		t.Fatalf("%d samples after a backwards step, want the newest replaced", w.Len())
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	var tr Tracker
	s := defaults()
	at := t0
	allocs := testing.AllocsPerRun(2000, func() {
		at = at.Add(20 * time.Millisecond)
		tr.Observe(at, 0.5, s)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per sample", allocs)
	}
}

func BenchmarkObserve(b *testing.B) {
	var tr Tracker
	s := defaults()
	at := t0
	for i := 0; b.Loop(); i++ {
		at = at.Add(20 * time.Millisecond)
		tr.Observe(at, 0.5+float64(i%7)/100, s)
	}
}
