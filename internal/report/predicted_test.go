package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

// TestPredictedStepdowns: a step taken before high because the trend
// reached critical within lead is counted under its own reason, in the
// text and in --json.
func TestPredictedStepdowns(t *testing.T) {
	events := []api.Event{
		start(0, "fp16", 0, 0),
		step(60, api.EventStepDown, api.ReasonPredicted, "fp16", 0, "int8", 1),
		step(600, api.EventStepDown, api.ReasonWatermark, "int8", 1, "int4", 2),
	}
	s := Summarize(events, at(700), true)
	if s.Stepdowns != 2 || s.StepdownsByReason[api.ReasonPredicted] != 1 || s.StepdownsByReason[api.ReasonWatermark] != 1 {
		t.Fatalf("stepdowns %d by reason %v", s.Stepdowns, s.StepdownsByReason)
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "stepdowns      2 (predicted 1, watermark 1)") {
		t.Errorf("text:\n%s", text.String())
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"stepdowns_by_reason":{"predicted":1,"watermark":1}`) {
		t.Errorf("json: %s", raw)
	}
}
