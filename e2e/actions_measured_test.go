package e2e

import (
	"strings"
	"testing"
	"time"
)

// offProfile is a serving = false profile without actions after the
// released one: stepping into it stops the child.
const offProfile = `
[[profile]]
name    = "off"
serving = false
`

// TestReleaseThatFreesNothingLeadsOn: SGLang without --enable-memory-saver
// answers the release with 200 and frees nothing. After grace the GPU is
// still over high, so the next step follows: the server is stopped.
func TestReleaseThatFreesNothingLeadsOn(t *testing.T) {
	s := startSleepRunEdited(t, "sglang_fake.py", sglangActions, func(p string) string { return p + offProfile },
		"FAKE_RELEASED_BYTES_SAME=1")
	s.neighbour(t, 11<<30)
	waitFor(t, "the stop", 30*time.Second, func() bool {
		st := s.status(t)
		return st["state"] == "asleep" && st["child_pid"].(float64) == 0 && st["profile"] == "off"
	})
	downs := events(s.e, "stepdown")
	if len(downs) != 2 {
		t.Fatalf("stepdown events %v", downs)
	}
	t.Log(strings.Join(downs, "\n"))
	s.p.signal(sigterm)
	s.p.wait()
}
