package cmd

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/paths"
)

// The commands that talk to one running instance (step, reload) share how
// they find it, how long they wait, and their flags.

// instanceFlags adds --runtime-dir and --timeout (default def).
func instanceFlags(c *cobra.Command, runtimeDir *string, timeout *time.Duration, def time.Duration) {
	c.Flags().StringVar(runtimeDir, "runtime-dir", "", "directory of control sockets")
	c.Flags().DurationVar(timeout, "timeout", def, "how long to wait for the instance to answer")
}

// checkInstance refuses an invalid NAME or --timeout (usage errors).
func checkInstance(name string, timeout time.Duration) error {
	if err := paths.ValidName(name); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if timeout <= 0 {
		return exitf(ExitUsage, "--timeout must be positive, got %s", timeout)
	}
	return nil
}

// withInstance connects to the instance name and calls do with a context
// that ends after timeout or at SIGINT/SIGTERM.
func withInstance(ctx context.Context, stdio *IO, runtimeDir, name string, timeout time.Duration,
	do func(context.Context, *control.Client) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := dialInstance(ctx, stdio, runtimeDir, name)
	if err != nil {
		return err
	}
	defer c.Close()
	return do(ctx, c)
}

// dialInstance connects to the control socket of the instance name, found
// in the runtime dirs in order (runtimeDir if given); a missing or stale
// socket exits 1.
func dialInstance(ctx context.Context, stdio *IO, runtimeDir, name string) (*control.Client, error) {
	env := paths.System()
	env.Getenv = stdio.Getenv
	dirs, err := env.RuntimeDirs(runtimeDir)
	if err != nil {
		return nil, err
	}
	sock := ""
	for _, d := range dirs {
		p := paths.Socket(d, name)
		fi, err := os.Lstat(p)
		if err == nil && fi.Mode()&fs.ModeSocket != 0 {
			sock = p
			break
		}
	}
	if sock == "" {
		return nil, exitf(ExitFailure, "no such instance %q (no socket in %s)", name, strings.Join(dirs, ", "))
	}
	c, err := control.Dial(ctx, sock)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, exitf(ExitFailure, "instance %q is not running (stale socket %s)", name, sock)
	}
	return c, err
}
