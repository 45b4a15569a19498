package sense

import (
	"math"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// Minute gathers the watermark samples of one wall-clock minute
// while a child runs, for the journal's per-minute watermark record: the
// review page draws a week of them as a band, where a line per sample
// would be a million lines. Like the journal's summary of granted
// admissions, it writes one line for many; unlike it, it is fed by the
// supervisor's loop, which has the samples.
type Minute struct {
	start         time.Time // the minute gathered; zero when empty
	min, max, sum float64
	n             int
	gpu           string // the GPU of the highest sample
}

// add feeds a sample taken at now. A sample in a later minute than those
// gathered first closes their minute: its record, timed at its end, is
// returned (ok) and the new minute begins with this sample.
func (m *Minute) add(now time.Time, ratio float64, gpu string) (rec api.Event, ok bool) {
	minute := now.Truncate(time.Minute)
	if m.n > 0 && minute.After(m.start) {
		rec, ok = m.take(m.start.Add(time.Minute))
	}
	if m.n == 0 {
		*m = Minute{start: minute, min: ratio, max: ratio, gpu: gpu}
	}
	m.n++
	m.sum += ratio
	m.min = math.Min(m.min, ratio)
	if ratio > m.max {
		m.max, m.gpu = ratio, gpu
	}
	return rec, ok
}

// flush closes the minute early (the child exited): the record covers its
// start until now. ok is false when nothing was gathered.
func (m *Minute) flush(now time.Time) (api.Event, bool) {
	if m.n == 0 {
		return api.Event{}, false
	}
	return m.take(now)
}

func (m *Minute) take(end time.Time) (api.Event, bool) {
	rec := api.Event{Time: end, Event: api.EventWatermark, GPU: m.gpu, Minute: &api.Minute{
		Min: round4(m.min), Mean: round4(m.sum / float64(m.n)), Max: round4(m.max), Samples: m.n,
	}}
	*m = Minute{}
	return rec, true
}

// round4 keeps four decimals: a ratio's 0.01 % is finer than any
// threshold, and a week of records stays small.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Note feeds a good sample's ratio, taken at now while a child runs, and
// journals the minute it closes. gpu is the worst GPU, as for a step; wm
// the thresholds the record carries.
func (m *Minute) Note(now time.Time, ratio float64, gpu string, wm policy.Watermark, j Journal) {
	if rec, ok := m.add(now, ratio, gpu); ok {
		emitMinute(rec, wm, j)
	}
}

// End journals the part of the minute before the child's exit.
func (m *Minute) End(now time.Time, wm policy.Watermark, j Journal) {
	if rec, ok := m.flush(now); ok {
		emitMinute(rec, wm, j)
	}
}

func emitMinute(rec api.Event, wm policy.Watermark, j Journal) {
	rec.High, rec.Critical = wm.High, wm.Critical
	j.Emit(rec)
}
