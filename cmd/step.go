package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/control"
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
			if err := checkInstance(opts.Name, opts.Timeout); err != nil {
				return err
			}
			if opts.Direction != control.StepDown && opts.Direction != control.StepUp {
				return exitf(ExitUsage, "direction %q: want down or up\n%s", opts.Direction, c.UseLine())
			}
			if runF != nil {
				return runF(opts)
			}
			return runStep(c.Context(), opts)
		},
	}
	instanceFlags(c, &opts.RuntimeDir, &opts.Timeout, stepDefaultTimeout)
	return c
}

func runStep(ctx context.Context, o *StepOptions) error {
	return withInstance(ctx, o.IO, o.RuntimeDir, o.Name, o.Timeout, func(ctx context.Context, c *control.Client) error {
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
	})
}
