package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/internal/buildinfo"
)

// IO is what commands read and write; tests replace it.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	Getenv func(string) string
}

// SystemIO is the process's own standard streams and environment.
// Its stderr drops what cannot be written (see droppingWriter).
func SystemIO() *IO {
	return &IO{In: os.Stdin, Out: os.Stdout, ErrOut: &droppingWriter{w: os.Stderr}, Getenv: os.Getenv}
}

// Main runs gpuguard with os.Args and returns the exit code.
func Main() int {
	catchSIGPIPE()
	return Execute(SystemIO(), os.Args[1:])
}

// Execute runs the command tree on args and returns the exit code, printing
// any error to io.ErrOut as "gpuguard: ...".
func Execute(stdio *IO, args []string) int {
	root := NewRootCmd(stdio)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if !asExit(err, &ee) || ee.Err != nil {
		fmt.Fprintf(stdio.ErrOut, "gpuguard: %v\n", err)
	}
	if ee != nil {
		for _, l := range ee.More {
			fmt.Fprintf(stdio.ErrOut, "gpuguard: %s\n", l)
		}
	}
	return exitCode(err)
}

// NewRootCmd builds the whole command tree.
func NewRootCmd(stdio *IO) *cobra.Command {
	root := &cobra.Command{
		Use:   "gpuguard",
		Short: "Supervise GPU inference servers: step down before OOM, restart one profile lower after it",
		Long: `gpuguard launches and watches a model server. It polls GPU memory, tells the
server to step down (lower precision, smaller batch) as memory fills, and on a
real out-of-memory exit restarts it in the next profile of a ladder declared in
policy.toml, keeping its checkpoint.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// An unknown command is a usage error (64), like every other.
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			hint := ""
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				hint = fmt.Sprintf(" (did you mean %q?)", s[0])
			}
			return exitf(ExitUsage, "unknown command %q for %q%s\nRun 'gpuguard --help' for the commands.", args[0], c.CommandPath(), hint)
		},
	}
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.ErrOut)
	// Flag errors are usage errors (64), not gpuguard failures.
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w\n%s", err, c.UseLine())}
	})
	root.AddCommand(
		NewCmdRun(stdio, nil),
		NewCmdStatus(stdio, nil),
		NewCmdStep(stdio, nil),
		NewCmdReload(stdio, nil),
		NewCmdReport(stdio, nil),
		NewCmdTasks(stdio, nil),
		NewCmdDoor(stdio, nil),
		NewCmdPolicy(stdio),
		NewCmdSim(stdio),
		NewCmdVersion(stdio, nil),
		NewCmdCompletion(stdio),
	)
	addCompletions(root, stdio)
	// --version, as systemctl, nvidia-smi and ollama take it: the line of
	// `gpuguard version`.
	var line strings.Builder
	info := buildinfo.Read()
	_ = writeVersion(&line, info)
	root.Version = info.Version
	root.SetVersionTemplate(line.String())
	// Ours replaces cobra's, which prints its help and exits 0 for a shell
	// it does not know.
	root.CompletionOptions.DisableDefaultCmd = true
	root.SuggestionsMinimumDistance = 2
	return root
}

// usageArgs wraps a cobra positional-argument validator so that its errors
// exit 64.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := v(c, args); err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w\n%s", err, c.UseLine())}
		}
		return nil
	}
}

func asExit(err error, target **ExitError) bool {
	return errors.As(err, target)
}
