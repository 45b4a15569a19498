package supervisor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: the
// loop, its timers and its probe calls must all end with Run, or a crash
// loop of thousands of restarts would pile them up (docs/reliability.md).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
