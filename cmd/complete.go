package cmd

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/control"
	probeopen "github.com/gpuguard/gpuguard/internal/backends/open"
	"github.com/gpuguard/gpuguard/internal/paths"
)

// Completion beyond command and flag names: what a user types after them.
// It is wired here, over the finished tree, so that each command's file
// stays about what the command does; the completion script (`gpuguard
// completion SHELL`) asks the binary, which answers with these.

// instanceCommands take an instance NAME as their first argument.
var instanceCommands = []string{"status", "step", "reload", "report", "tasks"}

// addCompletions registers the dynamic completions on root's commands:
// instance names (the sockets in the runtime dirs), step's down|up, and the
// values of --backend.
func addCompletions(root *cobra.Command, stdio *IO) {
	for _, c := range root.Commands() {
		name := c.Name()
		switch {
		case name == "step":
			c.ValidArgsFunction = func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				switch len(args) {
				case 0:
					return instanceNames(c, stdio), cobra.ShellCompDirectiveNoFileComp
				case 1:
					return []string{"down", "up"}, cobra.ShellCompDirectiveNoFileComp
				}
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
		case slices.Contains(instanceCommands, name) && c.ValidArgsFunction == nil:
			c.ValidArgsFunction = func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return instanceNames(c, stdio), cobra.ShellCompDirectiveNoFileComp
			}
		case name == "sim":
			for _, sub := range c.Commands() {
				if sub.Flags().Lookup("name") != nil {
					_ = sub.RegisterFlagCompletionFunc("name", func(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
						return instanceNames(c, stdio), cobra.ShellCompDirectiveNoFileComp
					})
				}
			}
		}
		if c.Flags().Lookup("backend") != nil {
			_ = c.RegisterFlagCompletionFunc("backend", cobra.FixedCompletions(probeopen.Names(), cobra.ShellCompDirectiveNoFileComp))
		}
	}
}

// instanceNames are the names of the instances whose sockets are in the
// runtime dirs (the command's --runtime-dir when given), each once.
func instanceNames(c *cobra.Command, stdio *IO) []string {
	flag := ""
	if f := c.Flags().Lookup("runtime-dir"); f != nil {
		flag = f.Value.String()
	}
	env := paths.System()
	env.Getenv = stdio.Getenv
	dirs, err := env.RuntimeDirs(flag)
	if err != nil {
		return nil
	}
	ins, _ := control.Discover(dirs)
	var names []string
	for _, in := range ins {
		if !slices.Contains(names, in.Name) && !strings.HasPrefix(in.Name, ".") {
			names = append(names, in.Name)
		}
	}
	return names
}
