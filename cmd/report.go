package cmd

import "github.com/spf13/cobra"

// ReportOptions placeholder; the real command replaces this file.
type ReportOptions struct{}

// NewCmdReport placeholder.
func NewCmdReport(stdio *IO, runF func(*ReportOptions) error) *cobra.Command {
	return &cobra.Command{Use: "report", Short: "not yet implemented"}
}
