package policy

import (
	"path/filepath"
	"testing"
)

// TestVLLMExampleStepsAhead: vLLM's steps are restarts, so its example
// steps ahead of the trend (lead), and not during its own loading (the
// predicted rule waits for grace after a start, which must be longer).
func TestVLLMExampleStepsAhead(t *testing.T) {
	p, err := Load(filepath.Join("..", "examples", "policies", "vllm.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if wm := p.Watermark; wm.Lead <= 0 || wm.Grace < wm.Lead {
		t.Errorf("lead %s, grace %s: want a lead, and a grace at least as long", wm.Lead, wm.Grace)
	}
}
