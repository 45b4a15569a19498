package cmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/backends"
	probeopen "github.com/gpuguard/gpuguard/backends/open"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/control/statusview"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/paths"
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
	f.StringVar(&opts.Probe.Backend, "backend", backends.Auto, "GPU backend when no instance answers: "+backends.List())
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
			if d, err := policy.ParseDuration(a); err == nil && d > 0 {
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
	if p.SimMemory, err = policy.ParseSize(simMemory); err != nil || p.SimMemory == 0 {
		return exitf(ExitUsage, "--sim-memory %q: want a size such as 16GiB", simMemory)
	}
	if p.SimDevices < 1 {
		return exitf(ExitUsage, "--sim-devices must be at least 1")
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
	g := &statusGatherer{o: o, dirs: dirs, open: probeopen.Probe, warned: map[string]bool{}}
	defer g.closeProbe()
	term := statusIsTerminal(o.IO.Out)
	view := statusview.Options{Color: term && o.IO.Getenv("NO_COLOR") == ""}

	if o.Watch == 0 {
		r, err := g.gather(ctx)
		if err != nil {
			return err
		}
		view.Now = time.Now()
		if err := statusRender(o.IO.Out, r, o.JSON, false, view); err != nil {
			return err
		}
		if o.Name != "" && r.Instances[0].State == api.StateUnreachable {
			return exitf(ExitFailure, "instance %q is unreachable: %s", o.Name, r.Instances[0].Error)
		}
		return nil
	}

	// Watching: an instance that is missing now may start later, so a
	// missing NAME just shows no instance.
	t := time.NewTicker(o.Watch)
	defer t.Stop()
	for {
		r, err := g.gather(ctx)
		if err != nil && !statusIsNoSuchInstance(err) {
			return err
		}
		var frame bytes.Buffer
		if term && !o.JSON {
			frame.WriteString("\x1b[H\x1b[2J") // home, clear: redraw in place
		}
		view.Now = time.Now()
		if err := statusRender(&frame, r, o.JSON, true, view); err != nil {
			return err
		}
		if _, err := o.IO.Out.Write(frame.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func statusRender(w io.Writer, r statusview.Report, asJSON, watching bool, view statusview.Options) error {
	if asJSON {
		return statusview.WriteJSON(w, r, watching)
	}
	return statusview.WriteTable(w, r, view)
}

// statusNoSuchInstance is the error for a NAME with no socket.
type statusNoSuchInstance struct{ name, dirs string }

func (e *statusNoSuchInstance) Error() string {
	return fmt.Sprintf("no such instance %q (no socket in %s)", e.name, e.dirs)
}

func statusIsNoSuchInstance(err error) bool {
	var e *ExitError
	if !asExit(err, &e) {
		return false
	}
	_, ok := e.Err.(*statusNoSuchInstance)
	return ok
}

// statusGatherer collects one report per call; across --watch refreshes it
// keeps the GPU backend open and prints each warning once.
type statusGatherer struct {
	o        *StatusOptions
	dirs     []string
	probe    gpu.Probe
	probeErr error                                      // opening failed: not retried
	open     func(probeopen.Options) (gpu.Probe, error) // probeopen.Probe; tests pass their own
	opening  <-chan backendCall[gpu.Probe]              // an opening still under way at its time limit
	reading  <-chan backendCall[gpu.Sample]             // a reading abandoned at its timeout, until it ends
	warned   map[string]bool
}

func (g *statusGatherer) gather(ctx context.Context) (statusview.Report, error) {
	r := statusview.Report{Instances: []api.Status{}, GPUs: []api.GPU{}}
	ins, err := control.Discover(g.dirs)
	if err != nil {
		g.warn(err.Error())
	}
	if g.o.Name != "" {
		ins = slices.DeleteFunc(ins, func(in control.Instance) bool { return in.Name != g.o.Name })
		if len(ins) == 0 {
			return r, &ExitError{Code: ExitFailure, Err: &statusNoSuchInstance{g.o.Name, strings.Join(g.dirs, ", ")}}
		}
		ins = ins[:1] // as root, the user's own dir comes before /run/gpuguard
	}
	r.Instances = control.QueryAll(ctx, ins, g.o.Timeout)
	r.Instances = g.sweep(ins, r.Instances)
	r.GPUs = statusview.UnionGPUs(r.Instances)
	answered := slices.ContainsFunc(r.Instances, func(st api.Status) bool { return st.State != api.StateUnreachable })
	if !answered && g.o.Name == "" {
		r.GPUs = g.probeGPUs(ctx)
	}
	r.GPUs = statusview.WithTenants(r.GPUs, r.Instances)
	describeProcesses(ctx, r.GPUs)
	return r, nil
}

// sweep removes the sockets of unreachable instances that are gone (their
// lock is free) and drops them from sts, ins' answers in order; a named
// instance stays, to be reported as not running.
func (g *statusGatherer) sweep(ins []control.Instance, sts []api.Status) []api.Status {
	out := sts[:0]
	for i, st := range sts {
		if st.State == api.StateUnreachable {
			swept, err := control.SweepStale(ins[i])
			if err != nil {
				g.warn(err.Error())
			}
			if swept && g.o.Name == "" {
				fmt.Fprintf(g.o.IO.ErrOut, "gpuguard: removed the stale socket %s: instance %q is not running\n", ins[i].Socket, ins[i].Name)
				continue
			}
		}
		out = append(out, st)
	}
	return out
}

func (g *statusGatherer) warn(msg string) {
	if !g.warned[msg] {
		g.warned[msg] = true
		fmt.Fprintf(g.o.IO.ErrOut, "gpuguard: warning: %s\n", msg)
	}
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
