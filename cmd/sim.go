package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/simdir"
	"github.com/gpuguard/gpuguard/policy"
)

// NewCmdSim is the `sim` command group: driving the simulated GPU.
func NewCmdSim(stdio *IO) *cobra.Command {
	c := &cobra.Command{
		Use:   "sim",
		Short: "Drive the simulated GPU of --backend sim",
		Long: `The simulated GPU (--backend sim) reads its usage from files: device i's used
memory is the sum of the files in <sim-dir>/<i>/. A file named by a PID counts
while that process lives; any other name is another tenant.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("missing subcommand\n%s", c.UsageString())}
		},
	}
	c.AddCommand(newCmdSimSet(stdio), newCmdSimXid(stdio))
	return c
}

// simTarget is the simulated GPU a `sim` subcommand acts on.
type simTarget struct {
	Dir        string
	Name       string // the instance whose sim dir to use
	RuntimeDir string
	GPU        int
}

func (t *simTarget) addFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&t.Dir, "dir", "", "sim dir (default $GPUGUARD_SIM_DIR, else --name's, else the one running sim instance's)")
	f.StringVar(&t.Dir, "sim-dir", "", "the same as --dir (as run and status spell it)")
	f.StringVar(&t.Name, "name", "", "use the sim dir of the instance NAME")
	f.StringVar(&t.RuntimeDir, "runtime-dir", "", "directory of control sockets (to find the running instances)")
	f.IntVar(&t.GPU, "gpu", 0, "simulated GPU index")
}

// resolve checks --gpu and finds the sim dir.
func (t *simTarget) resolve(stdio *IO) error {
	if t.GPU < 0 {
		return exitf(ExitUsage, "--gpu %d: want a non-negative index", t.GPU)
	}
	if t.Name != "" {
		if err := paths.ValidName(t.Name); err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--name: %w", err)}
		}
	}
	var err error
	t.Dir, err = simdir.Find(simdir.Query{Flag: t.Dir, Name: t.Name, RuntimeDir: t.RuntimeDir, AskRunning: true, Getenv: stdio.Getenv, Warn: stdio.ErrOut})
	return err
}

// simSetOptions is what `sim set` was asked to do.
type simSetOptions struct {
	simTarget
	Name string
	Size uint64
}

func newCmdSimSet(stdio *IO) *cobra.Command {
	var o simSetOptions
	c := &cobra.Command{
		Use:                   "set [--dir D | --name INSTANCE] [--gpu I] NAME SIZE",
		DisableFlagsInUseLine: true,
		Short:                 "Set a tenant's or a process's simulated usage (SIZE 0 removes it)",
		Long: `Set the simulated memory used on GPU I by NAME: a PID (the usage ends with
the process) or any other name (another tenant, until set to 0). SIZE is bytes
or a number with KiB, MiB, GiB, TiB (1024-based) or KB, MB, GB, TB (1000-based),
e.g. 12GiB or 1.5GB.

The sim dir is --dir (or --sim-dir), else $GPUGUARD_SIM_DIR (set for the
supervised child), else that of the instance --name NAME, else that of the one
running instance on the sim backend, else that of the only instance under the
default state root that has one.`,
		Example: "  gpuguard sim set --gpu 0 other-tenant 30GiB\n  gpuguard sim set --name llama other-tenant 5GiB\n  gpuguard sim set $$ 0",
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			o.Name = args[0]
			if err := gpu.ValidSimName(o.Name); err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if o.Size, err = policy.ParseSize(args[1]); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("SIZE: %w", err)}
			}
			if err := o.resolve(stdio); err != nil {
				return err
			}
			return runSimSet(stdio, o)
		},
	}
	o.addFlags(c)
	return c
}

func runSimSet(stdio *IO, o simSetOptions) error {
	warnSimGPU(stdio, o.Dir, o.GPU)
	if err := gpu.SimSet(o.Dir, o.GPU, o.Name, o.Size); err != nil {
		return err
	}
	path := filepath.Join(o.Dir, strconv.Itoa(o.GPU), o.Name)
	if o.Size == 0 {
		fmt.Fprintf(stdio.Out, "removed %s\n", path)
		return nil
	}
	fmt.Fprintf(stdio.Out, "%s = %d (%s)\n", path, o.Size, policy.FormatSize(o.Size))
	return nil
}

// simXidOptions is what `sim xid` was asked to do.
type simXidOptions struct {
	simTarget
	Xid uint64
}

func newCmdSimXid(stdio *IO) *cobra.Command {
	var o simXidOptions
	c := &cobra.Command{
		Use:                   "xid [--dir D | --name INSTANCE] [--gpu I] XID",
		DisableFlagsInUseLine: true,
		Short:                 "Inject a GPU fault event (Xid) into the simulated GPU",
		Long: `Deliver Xid XID on simulated GPU I to every instance watching it (every
instance sharing the sim dir), as a real GPU fault arrives through NVML.
A critical Xid (79, 48, 94, 95, ...; any but the application errors 13, 31,
43, 45, 68 and 109) makes the GPU stop answering for 1s, and a child that
exits meanwhile, or within 10s of the event, exited because of the GPU.

The sim dir is found as for sim set: --dir (or --sim-dir), $GPUGUARD_SIM_DIR,
--name NAME's, the one running sim instance's, or the only one under the
default state root.`,
		Example: "  gpuguard sim xid 79\n  gpuguard sim xid --gpu 1 13",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			if o.Xid, err = strconv.ParseUint(args[0], 10, 32); err != nil {
				return exitf(ExitUsage, "XID %q: want a non-negative number such as 79", args[0])
			}
			if err := o.resolve(stdio); err != nil {
				return err
			}
			return runSimXid(stdio, o)
		},
	}
	o.addFlags(c)
	return c
}

func runSimXid(stdio *IO, o simXidOptions) error {
	warnSimGPU(stdio, o.Dir, o.GPU)
	if err := gpu.SimXid(o.Dir, o.GPU, o.Xid, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "GPU %d of %s: %s\n", o.GPU, o.Dir, gpu.XidMeaning(o.Xid))
	return nil
}

// warnSimGPU warns when gpu is past the devices the sim dir has so far.
func warnSimGPU(stdio *IO, dir string, gpu int) {
	if n := simDeviceCount(dir); n > 0 && gpu >= n {
		fmt.Fprintf(stdio.ErrOut, "gpuguard: warning: %s has GPUs 0-%d only; GPU %d is watched only with --sim-devices %d or more\n",
			dir, n-1, gpu, gpu+1)
	}
}

// simDeviceCount is how many device dirs 0..n-1 the sim dir holds (0 when
// it does not exist yet).
func simDeviceCount(dir string) int {
	n := 0
	for {
		if st, err := os.Stat(filepath.Join(dir, strconv.Itoa(n))); err != nil || !st.IsDir() {
			return n
		}
		n++
	}
}
