package sense

import (
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// TestMinuteSummary: samples of one wall-clock minute make one record,
// timed at the minute's end, with their min, mean, max and count, and the
// GPU of the highest; the first sample of a later minute closes it; a
// flush closes a partial minute at its time, and an empty one gives none.
func TestMinuteSummary(t *testing.T) {
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var m Minute
	if _, ok := m.flush(base); ok {
		t.Fatal("an empty minute gave a record")
	}
	for i, r := range []float64{0.5, 0.9, 0.1, 0.3} {
		if _, ok := m.add(base.Add(time.Duration(i*15)*time.Second), r, []string{"a", "b", "c", "d"}[i]); ok {
			t.Fatalf("sample %d closed the minute", i)
		}
	}
	rec, ok := m.add(base.Add(61*time.Second), 0.2, "e")
	if !ok || rec.Event != api.EventWatermark || !rec.Time.Equal(base.Add(time.Minute)) || rec.GPU != "b" ||
		*rec.Minute != (api.Minute{Min: 0.1, Mean: 0.45, Max: 0.9, Samples: 4}) {
		t.Fatalf("record %+v %+v, ok %v", rec, rec.Minute, ok)
	}
	// A gap of minutes with no sample (a hung probe) has no record; the
	// minute gathered is closed at its own end.
	rec, ok = m.add(base.Add(5*time.Minute), 0.4, "f")
	if !ok || !rec.Time.Equal(base.Add(2*time.Minute)) || *rec.Minute != (api.Minute{Min: 0.2, Mean: 0.2, Max: 0.2, Samples: 1}) {
		t.Fatalf("record after a gap %+v %+v", rec, rec.Minute)
	}
	rec, ok = m.flush(base.Add(5*time.Minute + 20*time.Second))
	if !ok || !rec.Time.Equal(base.Add(5*time.Minute+20*time.Second)) || rec.Samples != 1 || rec.GPU != "f" {
		t.Fatalf("flushed %+v %+v", rec, rec.Minute)
	}
	if _, ok := m.flush(base.Add(6 * time.Minute)); ok {
		t.Fatal("a flushed minute gave a second record")
	}
	m.add(base, 1.0/3, "g")
	if rec, _ := m.flush(base.Add(time.Second)); rec.Mean != 0.3333 {
		t.Fatalf("mean %v, want four decimals", rec.Mean)
	}
}
