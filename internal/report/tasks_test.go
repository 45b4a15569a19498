package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

func TestTaskFigures(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	evs := []api.Event{
		{Time: at(0), Event: api.EventStart, Profile: "fp16"},
		{Time: at(1), Event: api.EventDeferred, Ticket: "a"},
		{Time: at(2), Event: api.EventDeferred, Ticket: "b"},
		{Time: at(3), Event: api.EventDeferred, Ticket: "c"},
		{Time: at(10), Event: api.EventTask, Ticket: "a", Attempt: 1, WaitSeconds: 9},
		{Time: at(11), Event: api.EventTaskDone, Ticket: "a"},
		{Time: at(12), Event: api.EventTask, Ticket: "b", Attempt: 1, WaitSeconds: 10},
		{Time: at(13), Event: api.EventTaskFailed, Ticket: "b"},
		{Time: at(14), Event: api.EventTaskDead, Ticket: "b"},
		{Time: at(20), Event: api.EventTask, Ticket: "c", Attempt: 1, WaitSeconds: 17},
	}
	s := Summarize(evs, at(30), false)
	if s.Tasks.Deferred != 3 || s.Tasks.Done != 1 || s.Tasks.Dead != 1 || s.Tasks.MedianWaitSeconds == nil || *s.Tasks.MedianWaitSeconds != 10 {
		t.Fatalf("tasks %+v", s.Tasks)
	}
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"tasks":{"deferred":3,"done":1,"dead":1,"median_wait_seconds":10}`) {
		t.Fatalf("json: %s", b)
	}
	var text strings.Builder
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "3 deferred, 1 done, 1 dead, median wait") {
		t.Fatalf("text:\n%s", text.String())
	}
	// None: null, and no line.
	s = Summarize(evs[:1], at(30), false)
	if s.Tasks.MedianWaitSeconds != nil {
		t.Fatalf("median with no delivery: %v", *s.Tasks.MedianWaitSeconds)
	}
}
