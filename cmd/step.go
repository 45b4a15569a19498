package cmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/paths"
)

// StepOptions is what `gpuguard step` was asked to do.
type StepOptions struct {
	IO         *IO
	Name       string
	Direction  string // down | up
	RuntimeDir string
	// Timeout bounds the wait for the reply: a step into a profile that is
	// not live restarts the child, which can take stop_timeout and more.
	Timeout time.Duration
}

const stepDefaultTimeout = 2 * time.Minute

// NewCmdStep builds `gpuguard step`. runF replaces the action in tests that
// only check argument parsing.
func NewCmdStep(stdio *IO, runF func(*StepOptions) error) *cobra.Command {
	opts := &StepOptions{IO: stdio}
	c := &cobra.Command{
		Use:   "step NAME down|up",
		Short: "Ask a running instance to change profile now",
		Long: `Ask the running instance NAME to step one profile down (more frugal) or up
(better quality) now, through its control socket. Prints the new profile once
the instance has written its state file and told its subscribers. Exits 1 if
there is no such instance or the step is refused (past either end of the
ladder).`,
		Example: "  gpuguard step llama down",
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name, opts.Direction = args[0], args[1]
			if err := paths.ValidName(opts.Name); err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if opts.Direction != control.StepDown && opts.Direction != control.StepUp {
				return exitf(ExitUsage, "direction %q: want down or up\n%s", opts.Direction, c.UseLine())
			}
			if opts.Timeout <= 0 {
				return exitf(ExitUsage, "--timeout must be positive, got %s", opts.Timeout)
			}
			if runF != nil {
				return runF(opts)
			}
			return runStep(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.RuntimeDir, "runtime-dir", "", "directory of control sockets")
	c.Flags().DurationVar(&opts.Timeout, "timeout", stepDefaultTimeout, "how long to wait for the instance to answer")
	return c
}

func runStep(ctx context.Context, o *StepOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	c, err := dialInstance(ctx, o.IO, o.RuntimeDir, o.Name)
	if err != nil {
		return err
	}
	defer c.Close()
	profile, err := c.Step(ctx, o.Direction)
	var re *control.RemoteError
	if errors.As(err, &re) {
		return exitf(ExitFailure, "instance %q refused to step %s: %s", o.Name, o.Direction, re.Message)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(o.IO.Out, profile)
	return nil
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
