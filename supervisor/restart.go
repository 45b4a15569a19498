package supervisor

import (
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

// exitKind classifies how a child ended.
type exitKind string

const (
	exitClean     exitKind = "clean"
	exitOOM       exitKind = "oom"
	exitCrash     exitKind = "crash"
	exitRequested exitKind = "watermark" // gpuguard stopped it to restart it
	// exitReload: gpuguard stopped it because a reload removed its profile.
	exitReload exitKind = "reload"
)

// classifyExit decides whether an exit was an out-of-memory exit: the child
// said so on the socket, or its exit code is listed, or its stderr tail
// matches a pattern. Otherwise status 0 is clean and anything else a crash.
// It returns the matched evidence for the journal.
func classifyExit(e Exit, oom policy.OOM, toldOOM string) (exitKind, string) {
	if toldOOM != "" {
		return exitOOM, "reported on the control socket: " + toldOOM
	}
	if e.Signal == 0 && oom.IsOOMExitCode(e.Code) {
		return exitOOM, "exit code listed in [oom] exit_codes"
	}
	if len(e.Stderr) > 0 {
		if m, ok := oom.MatchStderr(e.Stderr); ok {
			return exitOOM, m
		}
	}
	if e.Status() == 0 {
		return exitClean, ""
	}
	return exitCrash, ""
}

// diedOfNotify reports whether exit e was the child's death by the notify
// signal sig that gpuguard sent it at sentAt (zero: not sent to this
// child): killed by exactly that signal, seen within window of sending
// it. Another process killing the child with the same signal inside that
// window cannot be told apart (the kernel does not say who sent the fatal
// signal); it is taken for the notification too, which costs nothing but
// the crash count. Outside the window, or when the signal was skipped,
// such a death is a crash.
func diedOfNotify(e Exit, sig syscall.Signal, sentAt, now time.Time, window time.Duration) bool {
	return sig != 0 && !sentAt.IsZero() && e.Signal == sig && now.Sub(sentAt) <= window
}

// restartBudget tracks failures for backoff and the max_restarts window.
type restartBudget struct {
	consecutive int         // failures since the last child that ran reset_after
	recent      []time.Time // failure restarts within the window
}

// inWindow is how many failure restarts the max_restarts window holds,
// the one just recorded included.
func (b *restartBudget) inWindow() int { return len(b.recent) }

// failure records a failed child (crash or OOM) that ran for ran and
// returns the backoff before the next start, or giveUp when max_restarts
// restarts already happened within the window.
func (b *restartBudget) failure(now time.Time, ran time.Duration, r policy.Restart) (delay time.Duration, giveUp bool) {
	if ran >= r.ResetAfter {
		b.consecutive = 0
	}
	kept := b.recent[:0]
	for _, t := range b.recent {
		if now.Sub(t) < r.Window {
			kept = append(kept, t)
		}
	}
	b.recent = kept
	if len(b.recent) >= r.MaxRestarts {
		return 0, true
	}
	b.recent = append(b.recent, now)
	b.consecutive++
	return backoff(b.consecutive, r.Backoff, r.BackoffMax), false
}

// backoff is base doubled per consecutive failure after the first, capped
// at max: 1s, 2s, 4s, ... max.
func backoff(failures int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}
