package cmd

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/backends"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/simdir"
	"github.com/gpuguard/gpuguard/internal/status"
	"github.com/gpuguard/gpuguard/policy"
)

// StatusOptions is what `gpuguard status` was asked to do.
type StatusOptions struct {
	IO         *IO
	Name       string        // "" = every instance
	JSON       bool          // the contract's JSON instead of the table
	Watch      time.Duration // 0 = once; else refresh at this interval
	RuntimeDir string
	// Probe is the backend to show GPUs with when no instance answers.
	Probe probeopen.Options
	// Timeout bounds each instance's status request: one hung instance
	// must not hang the command.
	Timeout time.Duration
}

// Defaults of `status`.
const (
	statusDefaultWatch   = 2 * time.Second
	statusDefaultTimeout = time.Second
	statusProbeTimeout   = 2 * time.Second
)

// NewCmdStatus builds `gpuguard status`. runF replaces the action in tests
// that only check flag parsing.
func NewCmdStatus(stdio *IO, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: stdio, Timeout: statusDefaultTimeout}
	var devices, simMemory string
	c := &cobra.Command{
		Use:   "status [NAME] [--json] [--watch[=DUR]]",
		Short: "Show running instances and GPUs",
		Long: `Show every running gpuguard instance found in the runtime dir (each asked
over its control socket, in parallel, with a short timeout) and the GPUs they
watch. An instance that does not answer shows as "unreachable". With no
instance answering, the GPUs are read with --backend instead.

NAME shows one instance; it exits 1 if there is no such instance or it does
not answer. --watch refreshes until interrupted, every 2s or every DUR:
--watch=5s and --watch 5s both work (an argument after a bare --watch that
reads as a duration is the duration, as with watch -n). With --json --watch
each refresh is one line of JSON.`,
		Example: "  gpuguard status\n  gpuguard status llama --json\n  gpuguard status --watch 1s",
		Args:    usageArgs(cobra.MaximumNArgs(2)),
		RunE: func(c *cobra.Command, args []string) error {
			args, err := statusWatchArg(c, opts, args)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				opts.Name = args[0]
				if err := paths.ValidName(opts.Name); err != nil {
					return &ExitError{Code: ExitUsage, Err: err}
				}
			}
			if c.Flags().Changed("watch") && opts.Watch <= 0 {
				return exitf(ExitUsage, "--watch must be positive, got %s", opts.Watch)
			}
			if err := statusResolveProbe(&opts.Probe, c.Flags().Changed("devices"), devices, simMemory, stdio.Getenv); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runStatus(c.Context(), opts)
		},
	}
	f := c.Flags()
	f.BoolVar(&opts.JSON, "json", false, "print JSON: {\"instances\":[...],\"gpus\":[...]}")
	f.DurationVar(&opts.Watch, "watch", 0, "refresh every DUR (default 2s) until interrupted")
	f.Lookup("watch").NoOptDefVal = statusDefaultWatch.String()
	f.StringVar(&opts.RuntimeDir, "runtime-dir", "", "directory of control sockets")
	f.StringVar(&opts.Probe.Backend, "backend", backends.Auto, "GPU backend when no instance answers: "+probeopen.List())
	f.StringVar(&devices, "devices", "", "GPUs to show when no instance answers "+probeopen.DevicesDefaultHelp())
	f.StringVar(&opts.Probe.SimDir, "sim-dir", "", "sim backend: directory of usage files (default $GPUGUARD_SIM_DIR, else the only instance's)")
	f.StringVar(&opts.Probe.SimDir, "dir", "", "the same as --sim-dir (as sim set spells it)")
	f.IntVar(&opts.Probe.SimDevices, "sim-devices", 1, "sim backend: number of GPUs")
	f.StringVar(&simMemory, "sim-memory", "16GiB", "sim backend: memory of each GPU")
	return c
}

// statusWatchArg takes a duration that follows a bare --watch ("--watch
// 5s") as the watch period; pflag can only take an optional value with
// "=". So an instance whose name reads as a duration (rare) is watched
// with --watch=DUR for a DUR other than the default.
func statusWatchArg(c *cobra.Command, o *StatusOptions, args []string) ([]string, error) {
	f := c.Flags().Lookup("watch")
	if f.Changed && o.Watch == statusDefaultWatch {
		for i, a := range args {
			// Any duration, so that "--watch 0s" is refused as a
			// period rather than looked up as an instance called "0s".
			if d, err := policy.ParseDuration(a); err == nil {
				o.Watch = d
				args = slices.Delete(slices.Clone(args), i, i+1)
				break
			}
		}
	}
	if len(args) > 1 {
		return nil, exitf(ExitUsage, "want at most one NAME, got %q\n%s", args, c.UseLine())
	}
	return args, nil
}

// statusResolveProbe checks the backend flags; their errors are usage
// errors even though the backend is only opened if no instance answers.
func statusResolveProbe(p *probeopen.Options, devicesSet bool, devices, simMemory string, getenv func(string) string) error {
	if err := checkBackend(p.Backend); err != nil {
		return err
	}
	var flag *string
	if devicesSet {
		flag = &devices
	}
	var err error
	if p.Devices, p.DRMDevices, err = probeopen.SelectDevices(p.Backend, flag, getenv); err != nil {
		return withCode(ExitUsage, err)
	}
	p.FromEnv(getenv)
	if p.SimMemory, err = simFlags(simMemory, p.SimDevices); err != nil {
		return err
	}
	if p.SimDir != "" {
		if p.SimDir, err = filepath.Abs(p.SimDir); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	return nil
}

// runStatus prints once, or refreshes until ctx ends or SIGINT/SIGTERM.
func runStatus(ctx context.Context, o *StatusOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := paths.System()
	env.Getenv = o.IO.Getenv
	dirs, err := env.RuntimeDirs(o.RuntimeDir)
	if err != nil {
		return err
	}
	g := status.New(status.Options{Name: o.Name, Dirs: dirs, Timeout: o.Timeout, Backend: o.Probe.Backend,
		Open: func() (gpu.Probe, error) { return statusOpenProbe(o) }, ErrOut: o.IO.ErrOut})
	defer g.Close()
	term := statusIsTerminal(o.IO.Out)
	r, err := status.Show(ctx, g, status.ShowOptions{Out: o.IO.Out, JSON: o.JSON, Watch: o.Watch,
		Terminal: term, Color: term && o.IO.Getenv("NO_COLOR") == ""})
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if o.Watch == 0 && o.Name != "" && r.Instances[0].State == api.StateUnreachable {
		return exitf(ExitFailure, "instance %q is unreachable: %s", o.Name, r.Instances[0].Error)
	}
	return nil
}

// statusOpenProbe opens the backend of --backend and its flags; the sim
// backend without --sim-dir reads the one instance's sim dir (sim.go).
func statusOpenProbe(o *StatusOptions) (gpu.Probe, error) {
	po := o.Probe
	if po.Backend == backends.Sim && po.SimDir == "" {
		var err error
		if po.SimDir, err = simdir.Find(simdir.Query{Getenv: o.IO.Getenv, Warn: o.IO.ErrOut}); err != nil {
			return nil, err
		}
	}
	return probeopen.Probe(po)
}

// statusIsTerminal reports whether w is a terminal (TCGETS succeeds), the
// one case where colours and in-place redraws make sense.
func statusIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
