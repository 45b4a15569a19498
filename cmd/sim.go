package cmd

import "github.com/spf13/cobra"

// NewCmdSim placeholder; the real command replaces this file.
func NewCmdSim(stdio *IO) *cobra.Command {
	return &cobra.Command{Use: "sim", Short: "not yet implemented"}
}
