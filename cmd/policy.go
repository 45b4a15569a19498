package cmd

import "github.com/spf13/cobra"

// NewCmdPolicy placeholder; the real command replaces this file.
func NewCmdPolicy(stdio *IO) *cobra.Command {
	return &cobra.Command{Use: "policy", Short: "not yet implemented"}
}
