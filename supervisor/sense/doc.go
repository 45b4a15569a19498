// Package sense is how the supervisor reads its GPUs: when the next
// sample is due (Pacer: the adaptive period the trend asks for, the
// deadline of a call that hangs, a sample at once when a start waits for
// one) and the goroutine that makes the probe calls (the sampler, one call
// at a time, so a hung driver call blocks it and never the loop); a run
// of failed calls (Health: told when it changes and at most once a
// minute, on_gpu_lost's verdict); Xid faults (Faults: which GPUs are
// faulted, the fault an exit is blamed on); and the per-minute watermark
// record (Minute).
//
// It is the supervisor's own, as its decision core is: the loop holds
// each part as a field and hands it what it needs; what they tell goes
// out through a Journal (the loop's reporter). It decides nothing about
// the child: that is the core's.
package sense

import "github.com/gpuguard/gpuguard/api"

// Journal is where what the senses tell goes: events to journal, lines
// to log (the loop's reporter, which stamps the profile in force).
type Journal interface {
	Emit(ev api.Event)
	Logf(format string, args ...any)
}
