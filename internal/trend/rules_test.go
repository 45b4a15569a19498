package trend

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// defaults are the policy defaults (adaptive, 200 ms in [20 ms, 1 s]) with
// lead 5 s.
func defaults() Settings {
	return Settings{Adaptive: true, Interval: 200 * time.Millisecond, MinInterval: 20 * time.Millisecond,
		MaxInterval: time.Second, High: 0.90, Critical: 0.97, Low: 0.70, Lead: 5 * time.Second}
}

func TestPeriod(t *testing.T) {
	s := defaults()
	rising := func(slope float64) Line { return Line{N: 6, Span: time.Second, Slope: slope} }
	off := s
	off.Adaptive = false
	tests := []struct {
		name  string
		s     Settings
		ratio float64
		short Line
		calm  bool
		want  time.Duration
	}{
		{"not adaptive: interval while rising", off, 0.85, rising(0.5), false, 200 * time.Millisecond},
		{"not adaptive: interval while calm", off, 0.1, Line{}, true, 200 * time.Millisecond},
		{"no trend yet: interval", s, 0.1, Line{N: 4, Span: time.Second}, false, 200 * time.Millisecond},
		{"calm: max_interval", s, 0.3, rising(0), true, time.Second},
		{"flat, not calm: interval", s, 0.8, rising(0), false, 200 * time.Millisecond},
		{"rising far from high: interval", s, 0.5, rising(0.1), false, 200 * time.Millisecond},
		{"rising: a quarter of the time to high", s, 0.85, rising(0.1), false, 125 * time.Millisecond},
		{"rising close to high: shorter", s, 0.88, rising(0.1), false, 50 * time.Millisecond},
		{"rising fast: clamped to min_interval", s, 0.89, rising(1), false, 20 * time.Millisecond},
		{"rising above high: min_interval", s, 0.95, rising(0.01), false, 20 * time.Millisecond},
		{"rising beats calm", s, 0.5, rising(10), true, 20 * time.Millisecond},
		{"a tiny slope: interval, not overflow", s, 0.2, Line{N: 6, Span: time.Second, Slope: 1.5e-3}, false, 200 * time.Millisecond},
		{"a noisy slope that does not stand out is flat", s, 0.85, Line{N: 6, Span: time.Second, Slope: 0.1, SlopeErr: 0.06}, false, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Period(tt.s, tt.ratio, tt.short, tt.calm); got != tt.want {
				t.Errorf("Period = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestETA(t *testing.T) {
	long := func(slope float64) Line { return Line{N: 50, Span: 10 * time.Second, Slope: slope} }
	tests := []struct {
		name   string
		ratio  float64
		long   Line
		want   time.Duration
		rising bool
	}{
		{"rising", 0.87, long(0.02), 5 * time.Second, true},
		{"at critical", 0.97, long(0.02), 0, true},
		{"above critical", 0.99, long(0.02), 0, true},
		{"flat", 0.8, long(0), 0, false},
		{"falling", 0.8, long(-0.1), 0, false},
		{"no trend", 0.8, Line{N: 3, Span: time.Second, Slope: 1}, 0, false},
		{"a slow rise from far below", 0.17, long(2 * MinSlope), 400 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ETA(0.97, tt.ratio, tt.long)
			if ok != tt.rising || (ok && math.Abs((got-tt.want).Seconds()) > 1e-6) {
				t.Errorf("ETA = %s %v, want %s %v", got, ok, tt.want, tt.rising)
			}
		})
	}
}

func TestPredicts(t *testing.T) {
	s := defaults()
	noLead := s
	noLead.Lead = 0
	ramp := Line{N: 50, Span: 10 * time.Second, Slope: 0.03, Level: 0.85}
	short := Line{N: 6, Span: time.Second, Slope: 0.03, Level: 0.85}
	tests := []struct {
		name        string
		s           Settings
		ratio       float64
		short, long Line
		want        bool
	}{
		{"a ramp reaching critical within lead", s, 0.85, short, ramp, true},
		{"lead 0 never predicts", noLead, 0.85, short, ramp, false},
		{"below low", s, 0.69, short, ramp, false},
		{"critical beyond lead", s, 0.80, short, ramp, false},
		{"less than 5 s of trend", s, 0.85, short, Line{N: 20, Span: 4 * time.Second, Slope: 0.03}, false},
		{"no short trend", s, 0.85, Line{N: 4, Span: time.Second, Slope: 0.03}, ramp, false},
		{"a slope within 4 standard errors", s, 0.85, short, Line{N: 50, Span: 10 * time.Second, Slope: 0.03, SlopeErr: 0.008}, false},
		{"a rise smaller than 4 times the scatter", s, 0.85, short, Line{N: 50, Span: 10 * time.Second, Slope: 0.03, SlopeErr: 0.001, Scatter: 0.08}, false},
		{"flat in the newest second: a plateau after a jump", s, 0.9, Line{N: 6, Span: time.Second}, ramp, false},
		{"the newest second noisy but consistent", s, 0.85, Line{N: 6, Span: time.Second, Slope: 0.01, SlopeErr: 0.01}, ramp, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Predicts(tt.s, tt.ratio, tt.short, tt.long); got != tt.want {
				t.Errorf("Predicts = %v, want %v", got, tt.want)
			}
		})
	}
}

// simulate feeds a Tracker the curve v (ratio at t seconds), sampled at the
// period the forecasts ask for, for d, and returns every forecast with its
// sample time and ratio. noise adds uniform noise of ± that much.
type point struct {
	at    time.Duration
	ratio float64
	f     Forecast
}

func simulate(s Settings, d time.Duration, noise float64, seed uint64, v func(sec float64) float64) []point {
	var tr Tracker
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []point
	for at := time.Duration(0); at <= d; {
		r := v(at.Seconds()) + noise*(2*rng.Float64()-1)
		f := tr.Observe(t0.Add(at), r, s)
		out = append(out, point{at, r, f})
		at += f.Period
	}
	return out
}

// longestPredicted is the longest run of consecutive predicted samples.
func longestPredicted(ps []point) (time.Duration, time.Duration) {
	var best, start, at time.Duration
	in := false
	for _, p := range ps {
		switch {
		case p.f.Predicted && !in:
			in, start = true, p.at
		case !p.f.Predicted && in:
			in = false
		}
		if in && p.at-start >= best {
			best, at = p.at-start, start
		}
	}
	return best, at
}

func TestSteadyRampPredictsBeforeHigh(t *testing.T) {
	// 0.03/s from 0.55 reaches high (0.90) at 11.7 s; with lead 5 s and
	// sustain 1 s the step must come before that.
	for _, noise := range []float64{0, 0.02} {
		s := defaults()
		ps := simulate(s, 15*time.Second, noise, 7, func(sec float64) float64 { return 0.55 + 0.03*sec })
		first := time.Duration(-1)
		for i, p := range ps {
			if p.f.Predicted && first < 0 {
				first = p.at
			}
			if first >= 0 && p.at-first >= time.Second && p.ratio < s.High {
				break
			}
			if p.ratio > s.High || i == len(ps)-1 {
				t.Fatalf("noise ±%.2f: no predicted step sustained 1 s before high (first predicted at %s)", noise, first)
			}
		}
		// And the ETA counts down to critical.
		for _, p := range ps {
			if p.at == 10*time.Second && !(p.f.Rising && math.Abs(p.f.ETA.Seconds()-(0.97-p.ratio)/0.03) < 1.5) {
				t.Errorf("at 10 s: ETA %s rising %v, ratio %.3f", p.f.ETA, p.f.Rising, p.ratio)
			}
		}
	}
}

func TestNoPredictionOnNoiseOrSawtooth(t *testing.T) {
	tenMinutes := 10 * time.Minute
	saw := func(lo, hi, period float64) func(float64) float64 {
		return func(sec float64) float64 { return lo + (hi-lo)*math.Mod(sec, period)/period }
	}
	tests := []struct {
		name  string
		noise float64
		v     func(float64) float64
		// flat: noise alone never predicts, not even in the first 10 s.
		flat bool
	}{
		{"flat ±2% at 0.85", 0.02, func(float64) float64 { return 0.85 }, true},
		{"flat ±2% at 0.75", 0.02, func(float64) float64 { return 0.75 }, true},
		{"flat ±2% just below high", 0.02, func(float64) float64 { return 0.875 }, true},
		{"sawtooth 0.72-0.88 every 2 s", 0, saw(0.72, 0.88, 2), false},
		{"sawtooth 0.72-0.88 every 4 s", 0, saw(0.72, 0.88, 4), false},
		{"sawtooth 0.72-0.88 every 8 s", 0, saw(0.72, 0.88, 8), false},
		{"sawtooth 0.60-0.89 every 5 s, noisy", 0.01, saw(0.60, 0.89, 5), false},
		{"triangle 0.75-0.89 every 6 s", 0, func(sec float64) float64 { return 0.75 + 0.14*math.Abs(math.Mod(sec, 6)/3-1) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A 5 s lead alone rules out the slopes noise makes (0.85
			// to critical in 5 s is 0.024/s); with vLLM's 60 s lead
			// only the stands-out test keeps noise from predicting.
			// (A sawtooth's first tooth predicts with such a lead: the
			// limitation docs/sensing.md states.)
			leads := []time.Duration{5 * time.Second}
			if tt.flat {
				leads = append(leads, time.Minute)
			}
			for _, lead := range leads {
				for seed := range uint64(2) {
					for _, adaptive := range []bool{true, false} {
						s := defaults()
						s.Adaptive, s.Lead = adaptive, lead
						ps := simulate(s, tenMinutes, tt.noise, seed, tt.v)
						// Never for the default sustain (1 s), and never
						// at all once 10 s of history show the teeth: the
						// first tooth alone is a ramp like any other.
						if run, at := longestPredicted(ps); run >= time.Second {
							t.Fatalf("lead %s seed %d adaptive %v: predicted for %s from %s", lead, seed, adaptive, run, at)
						}
						for _, p := range ps {
							if p.f.Predicted && (p.at > LongSpan || tt.flat) {
								t.Fatalf("lead %s seed %d adaptive %v: predicted at %s (ratio %.3f)", lead, seed, adaptive, p.at, p.ratio)
							}
						}
					}
				}
			}
		})
	}
}

func TestJumpToPlateauDoesNotSustainAPrediction(t *testing.T) {
	// A server that allocates its cache in one go: 0.25 -> 0.90 at 20 s.
	// A line through the step slopes up, but the plateau after it is
	// flat, so the condition never holds for the default sustain (1 s).
	for _, noise := range []float64{0, 0.005} {
		s := defaults()
		s.Critical, s.High, s.Lead = 0.985, 0.96, 60*time.Second
		ps := simulate(s, time.Minute, noise, 3, func(sec float64) float64 {
			if sec < 20 {
				return 0.25
			}
			return 0.90
		})
		if run, at := longestPredicted(ps); run >= time.Second {
			t.Fatalf("noise %.3f: predicted for %s from %s", noise, run, at)
		}
	}
}

func TestCalmAfterFiveSecondsWithoutRise(t *testing.T) {
	s := defaults()
	ps := simulate(s, 30*time.Second, 0, 1, func(sec float64) float64 {
		switch {
		case sec < 12:
			return 0.3
		case sec < 14: // a rise toward high
			return 0.3 + 0.275*(sec-12)
		}
		return 0.5
	})
	period := func(at time.Duration) time.Duration {
		var last point
		for _, p := range ps {
			if p.at > at {
				break
			}
			last = p
		}
		return last.f.Period
	}
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{500 * time.Millisecond, 200 * time.Millisecond}, // no trend yet
		{5 * time.Second, 200 * time.Millisecond},        // a trend, not yet 5 s without rise
		{7 * time.Second, time.Second},                   // calm
		{11500 * time.Millisecond, time.Second},
		{17 * time.Second, 200 * time.Millisecond}, // risen within 5 s
		{23 * time.Second, time.Second},            // calm again
	} {
		if got := period(c.at); got != c.want {
			t.Errorf("period at %s = %s, want %s", c.at, got, c.want)
		}
	}
	// Rising toward high shortens the period; the sample before 12 s was
	// calm (1 s), so the rise is seen within a second and then followed.
	minSeen := time.Hour
	for _, p := range ps {
		if p.at > 12*time.Second && p.at < 14*time.Second {
			minSeen = min(minSeen, p.f.Period)
		}
	}
	if minSeen >= 200*time.Millisecond {
		t.Errorf("the period never shortened during the rise (min %s)", minSeen)
	}
}

// TestNoETAOnAPlateauAfterAJump: a one-off jump (another tenant loading its
// weights) then a flat watermark is not a trend: the 10 s line through the
// step slopes up, but no ETA is shown once the newest second is flat. A
// steady ramp keeps its ETA.
func TestNoETAOnAPlateauAfterAJump(t *testing.T) {
	s := defaults()
	ps := simulate(s, 40*time.Second, 0, 1, func(sec float64) float64 {
		if sec < 20 {
			return 0.10
		}
		return 0.875
	})
	for _, p := range ps {
		if p.at >= 22*time.Second && p.f.Rising {
			t.Fatalf("ETA %s at %s on a flat watermark after a jump", p.f.ETA, p.at)
		}
	}
	ramp := simulate(s, 15*time.Second, 0.005, 2, func(sec float64) float64 { return 0.30 + 0.03*sec })
	if last := ramp[len(ramp)-1]; !last.f.Rising || last.f.ETA <= 0 {
		t.Fatalf("a steady ramp lost its ETA: %+v", last.f)
	}
}
