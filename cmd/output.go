package cmd

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/gpuguard/gpuguard/internal/safetext"
)

// lineLog is a logf that prints one line to w after prefix: a line may
// quote a child, a client, an instance or a file, so it is escaped
// (safetext.Escape: a newline or an ESC in it cannot make a second line or
// drive the terminal).
func lineLog(w io.Writer, prefix string) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, "%s%s\n", prefix, safetext.Escape(fmt.Sprintf(format, args...)))
	}
}

// A supervisor must outlive whatever reads its output: journald, `| tee`,
// a terminal that was closed. By default a write to a closed pipe on
// stdout or stderr raises SIGPIPE, which ends a Go program at once (exit
// 141), and the child with it, its drain cut short. So gpuguard takes
// SIGPIPE (the write then fails with EPIPE) and drops what it could not
// write, counting it.

// catchSIGPIPE makes a write to a broken pipe fail with EPIPE instead of
// ending gpuguard. The signal is caught (and dropped), not ignored: an
// ignored signal would stay ignored in every child gpuguard starts, where
// a caught one is reset to its default at exec.
func catchSIGPIPE() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}

// droppingWriter writes to w and never fails: a write that cannot be made
// (its reader is gone) is dropped and counted. gpuguard's log lines go
// through it, so a dead reader stops no caller.
type droppingWriter struct {
	w       io.Writer
	dropped atomic.Uint64
}

func (d *droppingWriter) Write(p []byte) (int, error) {
	if _, err := d.w.Write(p); err != nil {
		d.dropped.Add(1)
	}
	return len(p), nil
}

// Dropped is how many writes were dropped.
func (d *droppingWriter) Dropped() uint64 { return d.dropped.Load() }
