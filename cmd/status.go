package cmd

import "github.com/spf13/cobra"

// StatusOptions placeholder; the real command replaces this file.
type StatusOptions struct{}

// NewCmdStatus placeholder.
func NewCmdStatus(stdio *IO, runF func(*StatusOptions) error) *cobra.Command {
	return &cobra.Command{Use: "status", Short: "not yet implemented"}
}
