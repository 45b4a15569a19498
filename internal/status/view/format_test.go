package view

import (
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

func TestLastEventShowsTheStep(t *testing.T) {
	now := time.Unix(100, 0)
	ev := &api.Event{Time: time.Unix(90, 0), Event: "stepdown", Profile: "fp16", From: "fp16", To: "int8", Reason: "watermark"}
	if got, want := LastEvent(ev, now), "stepdown fp16→int8 (watermark) 10s ago"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ev = &api.Event{Time: time.Unix(90, 0), Event: "start", Profile: "int4"}
	if got, want := LastEvent(ev, now), "start int4 10s ago"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
