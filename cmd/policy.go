package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

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

func newCmdPolicyCheck(stdio *IO) *cobra.Command {
	return &cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a policy and print the resolved ladder",
		Long: `Validate a policy file and print every resolved setting and the profile
ladder. FILE defaults to ./policy.toml if it exists, else the built-in
defaults are shown. Every problem is listed as FILE:LINE: KEY: message.

Exits 0 if the policy is valid, 78 if it is not (or a named FILE cannot be
read), 64 on usage errors.`,
		Example: "  gpuguard policy check\n  gpuguard policy check /etc/gpuguard/llama.toml",
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			file := ""
			if len(args) == 1 {
				if file = args[0]; file == "" {
					return exitf(ExitUsage, "empty FILE\n%s", c.UseLine())
				}
			}
			return runPolicyCheck(stdio, file)
		},
	}
}

func runPolicyCheck(stdio *IO, file string) error {
	pol, err := policy.LoadOrDefault(file)
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
	if pol.Source == "" {
		fmt.Fprintf(stdio.Out, "no %s in the working directory: showing the built-in defaults\n\n", policy.DefaultFile)
	} else {
		fmt.Fprintf(stdio.Out, "%s: valid\n\n", pol.Source)
	}
	return pol.WriteSummary(stdio.Out)
}
