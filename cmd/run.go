package cmd

import (
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/policy"
)

// RunOptions is everything `gpuguard run` was asked to do. A nil pointer
// field means the flag was not given (the policy decides).
type RunOptions struct {
	IO *IO

	PolicyFile  string
	Name        string
	Backend     *string
	Devices     *string
	Interval    *time.Duration
	StateDir    string
	RuntimeDir  string
	MetricsAddr *string
	Priority    *int
	Profile     string
	Observe     bool
	SimDevices  int
	SimMemory   string
	SimDir      string
	Command     []string
}

// NewCmdRun builds `gpuguard run`. runF replaces the action in tests that
// only check flag parsing.
func NewCmdRun(stdio *IO, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: stdio}
	var backend, devices, metricsAddr string
	var interval time.Duration
	var priority int
	c := &cobra.Command{
		Use:   "run [flags] [-- CMD [ARG...]]",
		Short: "Supervise one model server (the main job)",
		Long: `Launch CMD (default: the policy's command) and supervise it: poll GPU memory,
step it down through the policy's profile ladder as memory fills, and restart it
one profile lower after an out-of-memory exit. ${VAR} in CMD's arguments is
replaced from the current profile's env and the GPUGUARD_* variables.`,
		Example: `  gpuguard run --backend sim -- python3 examples/demo_server.py
  gpuguard run --policy /etc/gpuguard/llama.toml
  gpuguard run -- vllm serve M --max-num-seqs '${MAX_SEQS}'`,
		RunE: func(c *cobra.Command, args []string) error {
			f := c.Flags()
			if f.Changed("backend") {
				opts.Backend = &backend
			}
			if f.Changed("devices") {
				opts.Devices = &devices
			}
			if f.Changed("interval") {
				opts.Interval = &interval
			}
			if f.Changed("metrics-addr") {
				opts.MetricsAddr = &metricsAddr
			}
			if f.Changed("priority") {
				opts.Priority = &priority
			}
			opts.Command = args
			if runF != nil {
				return runF(opts)
			}
			return runRun(opts)
		},
	}
	// Everything after the first positional argument belongs to CMD.
	c.Flags().SetInterspersed(false)
	f := c.Flags()
	f.StringVar(&opts.PolicyFile, "policy", "", "policy file (default ./policy.toml if it exists, else built-in defaults)")
	f.StringVar(&opts.Name, "name", "", "instance name (default: the policy's name, else CMD's base name)")
	// --backend and --interval show no default of their own: the policy's
	// wins over the built-in one, so "(default auto)" would mislead.
	f.StringVar(&backend, "backend", "", "GPU backend: "+probeopen.List()+" (default: the policy's [watch] backend, else auto)")
	f.StringVar(&devices, "devices", "", "watched GPUs: indices, UUIDs (GPU-..., MIG-...) or, for drm, PCI addresses, comma-separated\n"+probeopen.DevicesDefaultHelp())
	f.DurationVar(&interval, "interval", 0, "GPU polling interval (default: the policy's [watch] interval, else 200ms)")
	f.StringVar(&opts.StateDir, "state-dir", "", "this instance's state dir (checkpoint, state file, journal, sim dir)")
	f.StringVar(&opts.RuntimeDir, "runtime-dir", "", "directory of control sockets")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics at HOST:PORT (empty disables)")
	f.StringVar(&opts.Profile, "profile", "", "start in this profile")
	f.IntVar(&priority, "priority", 0, "priority among the instances sharing a GPU, -1000..1000: the lowest steps down first (default: the policy's)")
	f.BoolVar(&opts.Observe, "observe", false, "decide and log, but never step down or restart because of the watermark")
	f.IntVar(&opts.SimDevices, "sim-devices", 1, "simulated GPUs (sim backend)")
	f.StringVar(&opts.SimMemory, "sim-memory", "16GiB", "memory of each simulated GPU (sim backend)")
	f.StringVar(&opts.SimDir, "sim-dir", "", "directory of simulated usage files (default <state-dir>/sim)")
	return c
}

// resolvedRun is a run whose inputs are all checked: what remains can only
// fail at run time.
type resolvedRun struct {
	opts *RunOptions
	pol  *policy.Policy
	name string
	// nameFrom is the policy key the name came from: "name", "command"
	// (its base name), or "" when --name gave it.
	nameFrom   string
	command    []string
	startLevel int
	devices    []string
	drmDevices []string // auto's selection if it falls back to DRM
	simMemory  uint64
	stateDir   string
	runtimeDir string
}

// resolveRun turns options into a resolved run: usage errors exit 64,
// policy errors 78. Nothing is touched on disk.
func resolveRun(o *RunOptions) (*resolvedRun, error) {
	pol, err := policy.LoadOrDefault(o.PolicyFile, knownBackends())
	if err != nil {
		return nil, withCode(ExitConfig, err)
	}
	r, err := resolvePolicy(o, pol)
	if err != nil {
		return nil, err
	}
	if o.Profile != "" {
		i, ok := pol.ProfileIndex(o.Profile)
		if !ok {
			return nil, exitf(ExitUsage, "--profile %q: no such profile in the ladder (%s)", o.Profile, profileNames(pol))
		}
		r.startLevel = i
	}
	if r.simMemory, err = simFlags(o.SimMemory, o.SimDevices); err != nil {
		return nil, err
	}
	env := paths.System()
	env.Getenv = o.IO.Getenv
	if r.stateDir, err = env.StateDir(o.StateDir, r.name); err != nil {
		return nil, withCode(ExitUsage, err)
	}
	if r.runtimeDir, err = env.RuntimeDir(o.RuntimeDir); err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return r, nil
}

// resolvePolicy applies the run's flags (--backend, --interval,
// --priority, --metrics-addr, --name, -- CMD) to pol, the run's policy file
// as read, and derives what depends on both: the command, the instance
// name, the devices. Start and reload share it, so a flag given at start
// keeps overriding the file after a reload (run_reload.go).
func resolvePolicy(o *RunOptions, pol *policy.Policy) (*resolvedRun, error) {
	if o.Backend != nil {
		if err := checkBackend(*o.Backend); err != nil {
			return nil, err
		}
		pol.Watch.Backend = *o.Backend
	}
	if o.Interval != nil {
		if *o.Interval <= 0 {
			return nil, exitf(ExitUsage, "--interval must be positive, got %s", *o.Interval)
		}
		pol.SetInterval(*o.Interval)
	}
	if o.Priority != nil {
		if p := *o.Priority; p < -policy.MaxPriority || p > policy.MaxPriority {
			return nil, exitf(ExitUsage, "--priority must be between %d and %d, got %d", -policy.MaxPriority, policy.MaxPriority, p)
		}
		pol.Priority = *o.Priority
	}
	if o.MetricsAddr != nil {
		pol.Metrics.Listen = *o.MetricsAddr
	}
	r := &resolvedRun{opts: o, pol: pol}
	r.command = o.Command
	if len(r.command) == 0 {
		r.command = pol.Command
	}
	if len(r.command) == 0 {
		return nil, exitf(ExitUsage, "no command to run: give one after -- or set command in the policy")
	}
	if err := pol.CheckArgs(r.command); err != nil {
		return nil, withCode(ExitConfig, err)
	}
	r.name = o.Name
	if r.name == "" {
		r.name, r.nameFrom = pol.Name, "name"
	}
	if r.name == "" {
		r.name, r.nameFrom = filepath.Base(r.command[0]), "command"
	}
	if err := paths.ValidName(r.name); err != nil {
		return nil, exitf(ExitUsage, "%v (set --name)", err)
	}
	// What runs is the resolved policy, as for the flags above: a reload
	// that changes only a key a flag fixes changes nothing.
	pol.Name, pol.Command = r.name, r.command
	var err error
	if r.devices, r.drmDevices, err = probeopen.SelectDevices(pol.Watch.Backend, o.Devices, o.IO.Getenv); err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return r, nil
}

func profileNames(p *policy.Policy) string {
	s := ""
	for i, pr := range p.Profiles {
		if i > 0 {
			s += ", "
		}
		s += pr.Name
	}
	return s
}
