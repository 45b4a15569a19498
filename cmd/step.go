package cmd

import "github.com/spf13/cobra"

// StepOptions placeholder; the real command replaces this file.
type StepOptions struct{}

// NewCmdStep placeholder.
func NewCmdStep(stdio *IO, runF func(*StepOptions) error) *cobra.Command {
	return &cobra.Command{Use: "step", Short: "not yet implemented"}
}
