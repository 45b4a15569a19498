package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/journal"
	"github.com/gpuguard/gpuguard/paths"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/report/instances"
	"github.com/gpuguard/gpuguard/tasks"
	"github.com/gpuguard/gpuguard/tasks/store"
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
	targets, err := taskTargets(o, env)
	if err != nil {
		return err
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	out := bufio.NewWriterSize(o.IO.Out, 64<<10)
	defer out.Flush()
	lw := newTaskLister(out, o.JSON, len(targets) > 1, now)
	for _, t := range targets {
		s, err := store.OpenAt(t.Dir, t.Name)
		if err != nil {
			return exitf(ExitFailure, "%s: %v", t.Name, err)
		}
		if s == nil {
			continue
		}
		err = eachTask(s, func(tk api.Task) error { lw.add(t.Name, tk); return nil })
		s.Close()
		if err != nil {
			return exitf(ExitFailure, "%s: %v", t.Name, err)
		}
	}
	return lw.close()
}

// eachTask streams a store's tasks where it can (SQLite), else lists them.
func eachTask(s tasks.Store, fn func(api.Task) error) error {
	if e, ok := s.(interface {
		Each(context.Context, func(api.Task) error) error
	}); ok {
		return e.Each(context.Background(), fn)
	}
	list, err := s.List(context.Background())
	if err != nil {
		return err
	}
	for _, t := range list {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

// taskTargets are the instances to list: --state-dir, else NAME under
// the state root, else every instance there with a queue.
func taskTargets(o *TasksOptions, env paths.Env) ([]instances.Target, error) {
	targets, _, err := instanceTargets(env, o.StateDir, o.Name, store.HasQueue)
	return targets, err
}

// taskRow is one task as `tasks --json` prints it.
type taskRow struct {
	Name       string  `json:"name,omitempty"`
	Ticket     string  `json:"ticket"`
	Tool       string  `json:"tool"`
	Priority   string  `json:"priority"`
	Bytes      uint64  `json:"bytes"`
	State      string  `json:"state"`
	Attempts   int     `json:"attempts"`
	AgeSeconds float64 `json:"age_seconds"`
	LastError  string  `json:"last_error"`
}

// taskLister writes rows as they come: 100,000 tasks never sit in
// memory twice.
type taskLister struct {
	w     io.Writer
	json  bool
	names bool
	now   time.Time
	n     int
	tw    *tabwriter.Writer
	enc   *json.Encoder
}

func newTaskLister(w io.Writer, asJSON, names bool, now time.Time) *taskLister {
	l := &taskLister{w: w, json: asJSON, names: names, now: now}
	if asJSON {
		io.WriteString(w, `{"tasks":[`)
		l.enc = json.NewEncoder(w)
	} else {
		l.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return l
}

func (l *taskLister) add(name string, t api.Task) {
	r := taskRow{Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority, Bytes: t.Bytes, State: t.State,
		Attempts: t.Attempts, AgeSeconds: l.now.Sub(t.Enqueued).Seconds(), LastError: t.LastError}
	if l.names {
		r.Name = name
	}
	if l.json {
		if l.n > 0 {
			io.WriteString(l.w, ",")
		}
		l.enc.Encode(r)
	} else {
		if l.n == 0 {
			if l.names {
				io.WriteString(l.tw, "NAME\t")
			}
			io.WriteString(l.tw, "TICKET\tTOOL\tPRIO\tBYTES\tSTATE\tATTEMPTS\tAGE\tLAST ERROR\n")
		}
		if l.names {
			fmt.Fprintf(l.tw, "%s\t", name)
		}
		fmt.Fprintf(l.tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Ticket, r.Tool, r.Priority, policy.FormatSize(r.Bytes),
			r.State, r.Attempts, time.Duration(r.AgeSeconds*float64(time.Second)).Round(time.Second), oneLine(r.LastError))
		if l.n%1000 == 999 {
			l.tw.Flush() // the columns of a long list are aligned per thousand rows
		}
	}
	l.n++
}

func (l *taskLister) close() error {
	if l.json {
		_, err := io.WriteString(l.w, "]}\n")
		return err
	}
	if l.n == 0 {
		io.WriteString(l.tw, "no deferred tasks\n")
	}
	return l.tw.Flush()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// changeTask is drop and retry: done in the store (shared with the
// running instance), then told to the instance, which journals the drop;
// with no instance running, the drop is journaled here.
func changeTask(o *TasksOptions, env paths.Env) error {
	if o.Name == "" {
		return exitf(ExitUsage, "%s needs NAME", o.Action)
	}
	dir, err := env.StateDir(o.StateDir, o.Name)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	s, err := store.OpenAt(dir, o.Name)
	if err != nil {
		return exitf(ExitFailure, "%s: %v", o.Name, err)
	}
	if s == nil {
		return exitf(ExitFailure, "%s has no deferred tasks (no queue in %s)", o.Name, dir)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ev api.Event
	switch o.Action {
	case "drop":
		t, err := s.Drop(ctx, o.Ticket)
		if err != nil {
			return exitf(ExitFailure, "%v", err)
		}
		ev = api.Event{Event: api.EventTaskDropped, Ticket: t.Ticket, Tool: t.Tool, Detail: "dropped by gpuguard tasks (state " + t.State + ")"}
		fmt.Fprintf(o.IO.Out, "dropped %s (%s, %s)\n", t.Ticket, t.Tool, t.State)
	case "retry":
		if err := s.Retry(ctx, o.Ticket, time.Now()); err != nil {
			return exitf(ExitFailure, "%v", err)
		}
		fmt.Fprintf(o.IO.Out, "queued %s again\n", o.Ticket)
	}
	if told := tellInstance(ctx, o, env, ev); !told && ev.Event != "" {
		jr, err := journal.Open(filepath.Join(dir, paths.JournalFile), journal.Options{Name: o.Name})
		if err != nil {
			return exitf(ExitFailure, "the task was dropped, but journaling it failed: %v", err)
		}
		ev.Time, ev.Name = time.Now(), o.Name
		jr.Observe(ev)
		if err := jr.Close(); err != nil {
			return exitf(ExitFailure, "the task was dropped, but journaling it failed: %v", err)
		}
	}
	return nil
}

// tellInstance tells a running instance of the change (it journals ev
// and re-reads its counts); false when none answers.
func tellInstance(ctx context.Context, o *TasksOptions, env paths.Env, ev api.Event) bool {
	rdir, err := env.RuntimeDir(o.RuntimeDir)
	if err != nil {
		return false
	}
	c, err := control.Dial(ctx, paths.Socket(rdir, o.Name))
	if err != nil {
		return false
	}
	defer c.Close()
	return c.NoteTask(ctx, ev) == nil
}
