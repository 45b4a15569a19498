package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/journal"
	"github.com/gpuguard/gpuguard/policy"
)

// TestReportRotatedJournal: a journal opened as `run` opens it, rotated
// until the run's start and step-down are gone, still reports them, and
// --since takes days. Its per-minute watermark records rotate with it,
// and are records, not events: the figures do not count them.
func TestReportRotatedJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root, run := t.TempDir(), t.TempDir()
		dir := filepath.Join(root, "llama")
		pol := policy.Journal{MaxSize: 64 << 10, MaxFiles: 1}
		j, err := journal.Open(filepath.Join(dir, "events.jsonl"), journalOptions(pol, "llama", time.Now(), t.Logf))
		if err != nil {
			t.Fatal(err)
		}
		emit := func(ev api.Event) {
			ev.Time, ev.Name = time.Now(), "llama"
			j.Observe(ev)
		}
		one := 1
		emit(api.Event{Event: api.EventStart, Profile: "fp16"})
		time.Sleep(time.Hour)
		emit(api.Event{Event: api.EventStepDown, Reason: api.ReasonWatermark, Profile: "fp16", To: "int8", ToLevel: &one})
		for i := range 1000 {
			if i%20 == 0 {
				emit(api.Event{Event: api.EventWatermark, Profile: "int8", Level: 1, GPU: "GPU-0",
					Minute: &api.Minute{Min: 0.5, Mean: 0.6, Max: 0.7, Samples: 300, High: 0.9, Critical: 0.97}})
			}
			emit(api.Event{Event: api.EventAdmission, Profile: "int8", Level: 1, Decision: "deny", Priority: "P0",
				Bytes: 1 << 40, Reason: "does not fit: 10 GiB used + 0 B leased + 1 TiB requested > 14.4 GiB; P0 gets deny"})
			time.Sleep(3 * time.Second)
		}
		emit(api.Event{Event: api.EventExit, Profile: "int8", Level: 1})
		j.Close()
		if b, _ := os.ReadFile(filepath.Join(dir, "events.jsonl.1")); strings.Contains(string(b), `"event":"start"`) {
			t.Fatal("the start is still in the journal: nothing rotated away")
		}

		code, out, errOut := runReportCmdAt(t, time.Now(), root, run, "llama", "--json", "--since", "7d")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got struct {
			Events           int                `json:"events"`
			Stepdowns        int                `json:"stepdowns"`
			SecondsInProfile map[string]float64 `json:"seconds_in_profile"`
			Admissions       map[string]int     `json:"admissions"`
			FallbackRate     float64            `json:"fallback_rate"`
		}
		json.Unmarshal([]byte(out), &got)
		if got.Events != 1003 || got.Stepdowns != 1 || got.SecondsInProfile["fp16"] != 3600 || got.SecondsInProfile["int8"] != 3000 ||
			got.Admissions["deny"] != 1000 || got.FallbackRate != 3000.0/6600 {
			t.Errorf("report of a rotated journal:\n%s", out)
		}
		evs, skipped, err := journal.Read(filepath.Join(dir, "events.jsonl"), time.Time{})
		if err != nil || skipped != 0 {
			t.Fatalf("reading the journal: %v (%d skipped)", err, skipped)
		}
		var minutes []api.Event
		for _, ev := range evs {
			if ev.Event == api.EventWatermark {
				minutes = append(minutes, ev)
			}
		}
		// 50 were written; the oldest rotated away with the start.
		if len(minutes) == 0 || len(minutes) >= 50 {
			t.Fatalf("%d watermark records kept, want some of the 50, not all", len(minutes))
		}
		if last := minutes[len(minutes)-1].Minute; last == nil ||
			*last != (api.Minute{Min: 0.5, Mean: 0.6, Max: 0.7, Samples: 300, High: 0.9, Critical: 0.97}) {
			t.Errorf("the newest watermark record reads back as %+v", last)
		}
	})
}
