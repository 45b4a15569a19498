package journal

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// TestWatermarkRecordsRotate: a week of per-minute watermark records
// (10,080 lines) rotates like any line: the files kept hold the newest
// records, every minute of them, whole and in order, and the oldest file
// kept begins with a totals record (so a report needs none of the rest).
func TestWatermarkRecordsRotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	j, err := Open(path, Options{Limits: Limits{MaxBytes: 128 << 10, MaxFiles: 3}, Totals: &countingTotals{}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	const week = 7 * 24 * 60
	for i := range week {
		j.Observe(api.Event{Time: base.Add(time.Duration(i+1) * time.Minute), Name: "llama", Event: api.EventWatermark,
			Profile: "fp16", GPU: "GPU-0", Minute: &api.Minute{Min: 0.5, Mean: 0.6, Max: float64(i%100) / 100,
				Samples: 300, High: 0.9, Critical: 0.97}})
		if i%1000 == 0 {
			j.Flush() // the queue holds 1,024
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".4"); err == nil {
		t.Fatal("more rotated files kept than max_files")
	}
	evs, skipped, err := Read(path, time.Time{})
	if err != nil || skipped != 0 {
		t.Fatalf("read: %v, %d skipped", err, skipped)
	}
	var minutes []api.Event
	for _, ev := range evs {
		if ev.Event == api.EventWatermark {
			minutes = append(minutes, ev)
		}
	}
	if len(minutes) < 1000 || len(minutes) >= week {
		t.Fatalf("%d records kept of %d: want the newest files' worth", len(minutes), week)
	}
	first := week - len(minutes) // the index of the oldest kept
	for k, ev := range minutes {
		i := first + k
		if !ev.Time.Equal(base.Add(time.Duration(i+1)*time.Minute)) || ev.Minute == nil ||
			ev.Max != float64(i%100)/100 || ev.Samples != 300 || ev.GPU != "GPU-0" {
			t.Fatalf("record %d of those kept (minute %d): %+v %+v", k, i, ev, ev.Minute)
		}
	}
	if evs[0].Event != api.EventTotals {
		t.Errorf("the oldest file kept begins with %s, not a totals record", evs[0].Event)
	}
}
