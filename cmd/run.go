package cmd

import "github.com/spf13/cobra"

// RunOptions placeholder; the real command replaces this file.
type RunOptions struct{}

// NewCmdRun placeholder.
func NewCmdRun(stdio *IO, runF func(*RunOptions) error) *cobra.Command {
	return &cobra.Command{Use: "run", Short: "not yet implemented"}
}
