package sense

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// ErrHung is the failure of a probe call that ran past the probe timeout.
var ErrHung = errors.New("GPU probe hung")

// Health is the bookkeeping of a run of failed probe calls: since when
// there has been no reading, and what the journal was last told, so that
// a lost GPU, or one that flaps, writes a line when the failure changes
// and at most one a minute otherwise (not five a second), each counting
// the failures it stands for.
type Health struct {
	downSince      time.Time // zero: the last call succeeded
	err            string    // the newest failure, "" when none
	reportedErr    string    // the last failure journaled ...
	reportedAt     time.Time // ... and when
	unreported     int       // failed calls not journaled since then
	streakReported bool      // this run of failures has a journal line
	lostErr        error     // on_gpu_lost = "stop" is stopping the child
}

// Down reports whether the last call failed: the last reading is stale.
func (h *Health) Down() bool { return !h.downSince.IsZero() }

// failed records a failed call at now (counted) or one still hung (not
// counted again), in a run without a reading since since. report is
// whether the journal gets a line, detail that line.
func (h *Health) failed(now, since time.Time, msg string, counted bool) (detail string, report bool) {
	if h.downSince.IsZero() {
		h.downSince = since
	}
	h.err = msg
	if counted {
		h.unreported++
	}
	if msg == h.reportedErr && now.Sub(h.reportedAt) < time.Minute {
		return "", false
	}
	detail = msg
	if n := h.unreported - 1; n > 0 {
		detail = fmt.Sprintf("%s (%d more failed probe calls since the last report)", msg, n)
	}
	h.reportedErr, h.reportedAt, h.unreported, h.streakReported = msg, now, 0, true
	return detail, true
}

// Recovered ends a run of failures at now. told reports whether the run
// had a journal line (so its end gets one), down how long it lasted.
func (h *Health) Recovered(now time.Time) (down time.Duration, told bool) {
	if h.downSince.IsZero() {
		return 0, false
	}
	down, told = now.Sub(h.downSince), h.streakReported
	h.downSince, h.err, h.streakReported = time.Time{}, "", false
	return down, told
}

// Lost reports, under on_gpu_lost = "stop", whether no reading has
// succeeded for lost_after by now; then LostErr says why.
func (h *Health) Lost(now time.Time, w policy.Watch) bool {
	if w.OnGPULost != policy.OnGPULostStop || h.downSince.IsZero() {
		return false
	}
	down := now.Sub(h.downSince)
	if down < w.LostAfter {
		return false
	}
	h.lostErr = fmt.Errorf("no GPU reading for %s (on_gpu_lost = \"stop\"): %s", down.Round(time.Millisecond), h.err)
	return true
}

// LostErr is why on_gpu_lost = "stop" is stopping the child; nil when it
// is not.
func (h *Health) LostErr() error { return h.lostErr }

// ForgetLost drops LostErr: the operator's stop takes over gpuguard's
// own, and the exit will be the child's.
func (h *Health) ForgetLost() { h.lostErr = nil }

// Report records a failed probe call (counted) or one still hung (not
// counted again), and tells it when the journal should hear. There is no
// reading from since on: the caller feeds the core a Gap, so that a step
// needs `sustain` of fresh data after it.
func (h *Health) Report(j Journal, now, since time.Time, msg string, counted bool) {
	detail, report := h.failed(now, since, msg, counted)
	if !report {
		return
	}
	j.Logf("GPU probe failed: %s (the child keeps running; no decisions without data)", detail)
	j.Emit(api.Event{Event: api.EventProbeError, Detail: detail})
}
