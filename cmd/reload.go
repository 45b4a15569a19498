package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/control"
)

// ReloadOptions is what `gpuguard reload` was asked to do.
type ReloadOptions struct {
	IO         *IO
	Name       string
	RuntimeDir string
	// Timeout bounds the wait for the reply (reading the file and one step
	// of the instance's loop: quick, unless the instance is stuck).
	Timeout time.Duration
}

const reloadDefaultTimeout = 30 * time.Second

// NewCmdReload builds `gpuguard reload`. runF replaces the action in tests
// that only check argument parsing.
func NewCmdReload(stdio *IO, runF func(*ReloadOptions) error) *cobra.Command {
	opts := &ReloadOptions{IO: stdio}
	c := &cobra.Command{
		Use:   "reload NAME",
		Short: "Re-read and apply a running instance's policy",
		Long: `Ask the running instance NAME to re-read the policy file it was started with
and apply it at once, without restarting its child: thresholds, intervals,
restart, notify, OOM, journal and metrics settings and priority. Flags given
to its run keep overriding the file. A changed ladder applies from the next
step or start (a running child whose profile is gone is restarted into the
best profile that fits); a changed command applies at the next start.

Prints the keys that changed. An invalid file, or one that changes the
instance's name, backend or devices, changes nothing: every problem is
printed as FILE:LINE: KEY: message and the exit status is 78. Exits 1 if
there is no such instance, 64 on usage errors. systemd's ExecReload= runs
it (systemctl reload gpuguard@NAME).`,
		Example: "  gpuguard reload llama\n  systemctl reload gpuguard@llama",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := checkInstance(opts.Name, opts.Timeout); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runReload(c.Context(), opts)
		},
	}
	instanceFlags(c, &opts.RuntimeDir, &opts.Timeout, reloadDefaultTimeout)
	return c
}

func runReload(ctx context.Context, o *ReloadOptions) error {
	var changed []string
	err := withInstance(ctx, o.IO, o.RuntimeDir, o.Name, o.Timeout, func(ctx context.Context, c *control.Client) error {
		var err error
		changed, err = c.Reload(ctx)
		return err
	})
	var re *control.RemoteError
	switch {
	case errors.As(err, &re) && len(re.Errors) > 0:
		// One problem a line, FILE:LINE: first, as policy check prints.
		for _, p := range re.Errors {
			fmt.Fprintln(o.IO.ErrOut, p)
		}
		return exitf(ExitConfig, "instance %q kept its policy: %s refused, nothing changed", o.Name, problemCount(len(re.Errors)))
	case errors.As(err, &re):
		return exitf(ExitFailure, "instance %q could not reload its policy: %s", o.Name, re.Message)
	case err != nil:
		return err
	}
	if len(changed) == 0 {
		fmt.Fprintf(o.IO.Out, "%s: policy reloaded, nothing changed\n", o.Name)
		return nil
	}
	fmt.Fprintf(o.IO.Out, "%s: policy reloaded, changed: %s\n", o.Name, strings.Join(changed, ", "))
	return nil
}

func problemCount(n int) string {
	if n == 1 {
		return "1 problem"
	}
	return fmt.Sprintf("%d problems", n)
}
