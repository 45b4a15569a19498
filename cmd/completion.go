package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// shells are the shells `gpuguard completion` writes a script for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

// NewCmdCompletion builds `gpuguard completion SHELL`: cobra's completion
// scripts, with a shell it does not know being a usage error (64).
func NewCmdCompletion(stdio *IO) *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "Print a shell completion script",
		Long:      "Print the completion script for SHELL, e.g.\n  gpuguard completion bash > /etc/bash_completion.d/gpuguard",
		ValidArgs: shells,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitf(ExitUsage, "want one SHELL: bash, zsh, fish or powershell\n%s", c.UseLine())
			}
			if err := cobra.OnlyValidArgs(c, args); err != nil {
				return exitf(ExitUsage, "unknown shell %q: want bash, zsh, fish or powershell\n%s", args[0], c.UseLine())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return WriteCompletion(c.Root(), args[0], stdio.Out)
		},
	}
}

// WriteCompletion writes root's completion script for shell, one of shells,
// to w. `gpuguard completion` and the package's installed scripts
// (scripts/gendocs) both call it, so the two cannot differ.
func WriteCompletion(root *cobra.Command, shell string, w io.Writer) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(w)
	}
	return fmt.Errorf("no completion script for shell %q", shell)
}
