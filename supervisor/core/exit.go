package core

import (
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/internal/exitcode"
	"github.com/gpuguard/gpuguard/policy"
)

// Exit is how a child ended.
type Exit struct {
	Code   int            // exit status; -1 when killed by a signal
	Signal syscall.Signal // the killing signal, or 0
	Stderr []byte         // the last 64 KiB of stderr when scanned
}

// Status is the child's status as gpuguard reports it: n, or 128+s.
func (e Exit) Status() int {
	if e.Signal != 0 {
		return exitcode.Signaled(int(e.Signal))
	}
	return e.Code
}

// ExitKind classifies how a child ended. Its values are what
// GPUGUARD_LAST_EXIT and the restart event's reason say.
type ExitKind string

// The kinds of exit.
const (
	ExitClean     ExitKind = "clean"
	ExitOOM       ExitKind = "oom"
	ExitCrash     ExitKind = "crash"
	ExitRequested ExitKind = "watermark" // gpuguard stopped it to restart it
	// ExitReload: gpuguard stopped it because a reload removed its profile.
	ExitReload ExitKind = "reload"
	// ExitGPUFault: a GPU fault (an Xid event) ended it.
	ExitGPUFault ExitKind = "gpu_fault"
)

// ClassifyExit decides whether an exit was an out-of-memory exit: the
// child said so on the socket, or its exit code is listed, or its stderr
// tail matches a pattern. Otherwise status 0 is clean and anything else a
// crash. It returns the matched evidence for the journal.
func ClassifyExit(e Exit, oom policy.OOM, toldOOM string) (ExitKind, string) {
	if toldOOM != "" {
		return ExitOOM, "reported on the control socket: " + toldOOM
	}
	if e.Signal == 0 && oom.IsOOMExitCode(e.Code) {
		return ExitOOM, "exit code listed in [oom] exit_codes"
	}
	if len(e.Stderr) > 0 {
		if m, ok := oom.MatchStderr(e.Stderr); ok {
			return ExitOOM, m
		}
	}
	if e.Status() == 0 {
		return ExitClean, ""
	}
	return ExitCrash, ""
}

// DiedOfNotify reports whether exit e was the child's death by the notify
// signal sig that gpuguard sent it at sentAt (zero: not sent to this
// child): killed by exactly that signal, seen within window of sending
// it. Another process killing the child with the same signal inside that
// window cannot be told apart (the kernel does not say who sent the fatal
// signal); it is taken for the notification too, which costs nothing but
// the crash count. Outside the window, or when the signal was skipped,
// such a death is a crash.
func DiedOfNotify(e Exit, sig syscall.Signal, sentAt, now time.Time, window time.Duration) bool {
	return sig != 0 && !sentAt.IsZero() && e.Signal == sig && now.Sub(sentAt) <= window
}

// Budget tracks failures for backoff and the max_restarts window.
type Budget struct {
	consecutive int         // failures since the last child that ran reset_after
	recent      []time.Time // failure restarts within the window
}

// InWindow is how many failure restarts the max_restarts window holds,
// the one just recorded included.
func (b *Budget) InWindow() int { return len(b.recent) }

// Failure records a failed child (crash or OOM) that ran for ran and
// returns the backoff before the next start, or giveUp when max_restarts
// restarts already happened within the window.
func (b *Budget) Failure(now time.Time, ran time.Duration, r policy.Restart) (delay time.Duration, giveUp bool) {
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
	return Backoff(b.consecutive, r.Backoff, r.BackoffMax), false
}

// Backoff is base doubled per consecutive failure after the first, capped
// at max: 1s, 2s, 4s, ... max.
func Backoff(failures int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}
