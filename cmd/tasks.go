package cmd

import (
	"bufio"
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/tasks/admin"
	"github.com/gpuguard/gpuguard/internal/tasks/store"
)

// TasksOptions is what `gpuguard tasks` was asked to do.
type TasksOptions struct {
	IO         *IO
	Name       string
	Action     string // "" (list), "drop" or "retry"
	Ticket     string
	JSON       bool
	StateDir   string
	RuntimeDir string
	Now        func() time.Time
}

// NewCmdTasks builds `gpuguard tasks`.
func NewCmdTasks(stdio *IO, runF func(*TasksOptions) error) *cobra.Command {
	opts := &TasksOptions{IO: stdio}
	c := &cobra.Command{
		Use:   "tasks [NAME] [drop|retry TICKET]",
		Short: "List, drop or retry deferred tasks",
		Long: `List an instance's deferred-task queue (every instance's without NAME): ticket,
tool, priority, bytes, state (queued, running, done, dead), attempts, age and
last error. "drop TICKET" deletes a task (the only way a task is lost; it is
journaled); "retry TICKET" puts a dead task back with its attempts reset.`,
		Example: `  gpuguard tasks llama
  gpuguard tasks llama --json
  gpuguard tasks llama retry t-3f9c...`,
		Args: func(c *cobra.Command, args []string) error {
			switch len(args) {
			case 0, 1:
				return nil
			case 3:
				if args[1] == "drop" || args[1] == "retry" {
					return nil
				}
				return exitf(ExitUsage, "unknown action %q: want drop or retry", args[1])
			}
			return exitf(ExitUsage, "want [NAME] or NAME drop|retry TICKET")
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				opts.Name = args[0]
			}
			if len(args) == 3 {
				opts.Action, opts.Ticket = args[1], args[2]
			}
			if runF != nil {
				return runF(opts)
			}
			return runTasks(opts)
		},
	}
	f := c.Flags()
	f.BoolVar(&opts.JSON, "json", false, "print JSON")
	f.StringVar(&opts.StateDir, "state-dir", "", "the instance's own state dir (holding deferred/)")
	f.StringVar(&opts.RuntimeDir, "runtime-dir", "", "directory of control sockets (to tell a running instance)")
	return c
}

func runTasks(o *TasksOptions) error {
	if o.Name != "" {
		if err := paths.ValidName(o.Name); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	env := paths.System()
	env.Getenv = o.IO.Getenv
	if o.Action != "" {
		return changeTask(o, env)
	}
	targets, _, err := instanceTargets(env, o.StateDir, o.Name, store.HasQueue)
	if err != nil {
		return err
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	out := bufio.NewWriterSize(o.IO.Out, 64<<10)
	defer out.Flush()
	if err := admin.List(out, targets, o.JSON, now); err != nil {
		return withCode(ExitFailure, err)
	}
	return nil
}

// changeTask is drop and retry (tasks/admin does them).
func changeTask(o *TasksOptions, env paths.Env) error {
	if o.Name == "" {
		return exitf(ExitUsage, "%s needs NAME", o.Action)
	}
	dir, err := env.StateDir(o.StateDir, o.Name)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	c := admin.Change{Name: o.Name, Dir: dir, Action: o.Action, Ticket: o.Ticket}
	if rdir, err := env.RuntimeDir(o.RuntimeDir); err == nil {
		c.Socket = paths.Socket(rdir, o.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg, err := c.Do(ctx)
	if msg != "" {
		fmt.Fprintln(o.IO.Out, msg)
	}
	if err != nil {
		return withCode(ExitFailure, err)
	}
	return nil
}
