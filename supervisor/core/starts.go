package core

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// Starts is the start rule, supervisord's startsecs and startretries: a
// child that failed on its own, not by OOM, before it ran start_secs and
// before it said it was ready never started, and start_retries such exits
// in a row end the run at once, with the child's status. A typo in the
// command, a missing file or a bad flag then costs seconds rather than
// max_restarts backoffs (10 of them, up to a minute each). An OOM at load
// is no such exit: it walks the ladder as always.
type Starts struct {
	quick int // failed exits in a row before start_secs and ready
	// ready: the child running, or the one that just exited, said it was
	// ready or answered the front door's health check (Ready, since its
	// Launched).
	ready bool
}

// failed counts the failed exit of a child that ran for ran and reports
// whether it was a quick exit and whether the run gives up.
func (s *Starts) failed(ran time.Duration, kind ExitKind, r policy.Restart) (quick, giveUp bool) {
	if kind == ExitOOM || s.ready || r.StartSecs <= 0 || ran >= r.StartSecs {
		s.quick = 0
		return false, false
	}
	s.quick++
	return true, s.quick >= r.StartRetries
}

// quickNote is what the restart line adds after a quick exit: how near the
// start rule is to giving up.
func (s *Starts) quickNote(ran time.Duration, r policy.Restart) string {
	return fmt.Sprintf("; it ran %s, under start_secs (%s): %d of %d such exits in a row before gpuguard gives up (start_retries)",
		ran.Round(time.Millisecond), r.StartSecs, s.quick, r.StartRetries)
}

// neverStarted ends the run by the start rule: the giveup event and the
// log line name the rule and the child's last line of stderr, the likeliest
// reason (a Python traceback's last line, "command not found").
func (s *Starts) neverStarted(e Exit, ran time.Duration, r policy.Restart) []Effect {
	detail := fmt.Sprintf("the child never started: %d exits in a row, each before start_secs (%s) and before any ready; the last with status %d after %s",
		s.quick, r.StartSecs, e.Status(), ran.Round(time.Millisecond))
	if line := lastLine(e.Stderr); line != "" {
		detail += fmt.Sprintf("; its last stderr line: %q", line)
	}
	return []Effect{
		Journal{api.Event{Event: api.EventGiveUp, Status: new(e.Status()), Detail: detail, Stderr: LastLines(e.Stderr, 20)}},
		Log{"giving up: " + detail},
		Finish{State: api.StateFatal, End: EndStatus, Status: e.Status()},
	}
}

// lastLine is the last line of b with text in it, at most 200 bytes of it.
func lastLine(b []byte) string {
	lines := LastLines(b, 20)
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if len(l) > 200 {
				l = strings.ToValidUTF8(l[:200], "") + "..." // no half character
			}
			return l
		}
	}
	return ""
}
