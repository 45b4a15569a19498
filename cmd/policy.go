package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/internal/backends"
	"github.com/gpuguard/gpuguard/policy"
)

// NewCmdPolicy builds `gpuguard policy`, which holds policy-file tools.
func NewCmdPolicy(stdio *IO) *cobra.Command {
	c := &cobra.Command{
		Use:   "policy",
		Short: "Validate and inspect policy files",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return exitf(ExitUsage, "unknown command %q for %q\n%s", args[0], c.CommandPath(), c.UseLine())
			}
			return c.Help()
		},
	}
	c.AddCommand(newCmdPolicyCheck(stdio))
	return c
}

// policyCheckOptions is what `policy check` was asked to do.
type policyCheckOptions struct {
	File       string
	Backend    string // "" = the policy's
	SimDevices int
	SimMemory  string
}

func newCmdPolicyCheck(stdio *IO) *cobra.Command {
	var o policyCheckOptions
	c := &cobra.Command{
		Use:   "check [FILE] [--backend sim [--sim-memory SIZE] [--sim-devices N]]",
		Short: "Validate a policy and print the resolved ladder",
		Long: `Validate a policy file and print every resolved setting and the profile
ladder. FILE defaults to ./policy.toml if it exists, else the built-in
defaults are shown. Every problem is listed as FILE:LINE: KEY: message.

It warns when no profile can ever fit: the smallest needs exceeds the
[watch] quota, or, on the sim backend (the policy's, or --backend sim), the
simulated GPU's memory (--sim-memory, 16GiB as for run). A real GPU's total
is not read: a check never opens a driver, so it stays fast on a sick host;
run exits 75 with the same words once it has read the GPU.

Exits 0 if the policy is valid (warnings or not), 78 if it is not (or a
named FILE cannot be read), 64 on usage errors.`,
		Example: "  gpuguard policy check\n  gpuguard policy check /etc/gpuguard/llama.toml\n  gpuguard policy check examples/policies/vllm.toml --backend sim --sim-memory 80GiB",
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				if o.File = args[0]; o.File == "" {
					return exitf(ExitUsage, "empty FILE\n%s", c.UseLine())
				}
			}
			if o.Backend != "" {
				if err := checkBackend(o.Backend); err != nil {
					return err
				}
			}
			return runPolicyCheck(stdio, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Backend, "backend", "", "judge the fit as run with this backend would (only sim is read: no driver is opened)")
	f.IntVar(&o.SimDevices, "sim-devices", 1, "simulated GPUs (sim backend)")
	f.StringVar(&o.SimMemory, "sim-memory", "16GiB", "memory of each simulated GPU (sim backend)")
	return c
}

func runPolicyCheck(stdio *IO, o policyCheckOptions) error {
	file := o.File
	simMemory, err := simFlags(o.SimMemory, o.SimDevices)
	if err != nil {
		return err
	}
	pol, err := policy.LoadOrDefault(file, knownBackends())
	if err != nil {
		var list policy.ErrorList
		if !errors.As(err, &list) {
			return &ExitError{Code: ExitConfig, Err: err}
		}
		// One problem a line, FILE:LINE: first, for editors and grep.
		for _, e := range list {
			fmt.Fprintln(stdio.ErrOut, e)
		}
		name := file
		if name == "" {
			name = policy.DefaultFile
		}
		return exitf(ExitConfig, "%s: invalid policy (%s)", name, problemCount(len(list)))
	}
	if why := policyNeverFits(pol, o, simMemory); why != "" {
		fmt.Fprintf(stdio.ErrOut, "gpuguard: warning: no profile can ever fit: %s; run would exit %d\n", why, ExitNoFit)
	}
	if pol.Source == "" {
		fmt.Fprintf(stdio.Out, "no %s in the working directory: showing the built-in defaults\n\n", policy.DefaultFile)
	} else {
		fmt.Fprintf(stdio.Out, "%s: valid\n\n", pol.Source)
	}
	return pol.WriteSummary(stdio.Out)
}

// policyNeverFits judges NeverFits with what a check can know without a
// driver: the quota, and the simulated GPU's memory on the sim backend.
func policyNeverFits(pol *policy.Policy, o policyCheckOptions, simMemory uint64) string {
	backend := o.Backend
	if backend == "" {
		backend = pol.Watch.Backend
	}
	if backend != backends.Sim {
		return pol.NeverFits(nil)
	}
	gpus := make([]policy.GPUTotal, o.SimDevices)
	for i := range gpus {
		gpus[i] = policy.GPUTotal{Index: i, Total: simMemory}
	}
	return pol.NeverFits(gpus)
}
