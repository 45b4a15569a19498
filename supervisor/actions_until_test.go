package supervisor

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

// TestActionStepsCarryAcceptAndUntil: an action's accept and until reach
// the call, the until's path on upstream like the call's own.
func TestActionStepsCarryAcceptAndUntil(t *testing.T) {
	prof := policy.Profile{Name: "unloaded"}
	acts := []policy.Action{
		{Method: "POST", Path: "/models/unload", Accept: []int{400}, Timeout: time.Minute,
			Until: policy.Until{Path: "/props?model=tiny&autoload=false", Status: []int{400}, Body: "not loaded", Timeout: 30 * time.Second}},
		{Method: "POST", Path: "/models/load"},
	}
	steps := actionSteps(prof, acts, "http://127.0.0.1:8081")
	c := steps[0].call
	if !slices.Equal(c.Accept, []int{400}) || c.UntilURL != "http://127.0.0.1:8081/props?model=tiny&autoload=false" ||
		!slices.Equal(c.UntilStatus, []int{400}) || c.UntilBody != "not loaded" || c.UntilTimeout != 30*time.Second {
		t.Errorf("unload call = %+v", c)
	}
	if c := steps[1].call; c.Accept != nil || c.UntilURL != "" {
		t.Errorf("load call = %+v, want no accept and no until", c)
	}
}
