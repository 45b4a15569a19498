package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/report/instances"
	"github.com/gpuguard/gpuguard/internal/safetext"
	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/store"
	"github.com/gpuguard/gpuguard/policy"
)

// List writes the tasks of targets to w, as a table or as JSON
// ({"tasks":[...]}), with a NAME column (a "name" key) when there are
// several. A target without a queue is skipped.
func List(w io.Writer, targets []instances.Target, asJSON bool, now time.Time) error {
	lw := newLister(w, asJSON, len(targets) > 1, now)
	for _, t := range targets {
		s, err := store.OpenAt(t.Dir, t.Name)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
		if s == nil {
			continue
		}
		err = each(s, func(tk api.Task) error { lw.add(t.Name, tk); return nil })
		s.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	return lw.close()
}

// each streams a store's tasks where it can (SQLite), else lists them.
func each(s tasks.Store, fn func(api.Task) error) error {
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

// row is one task as `tasks --json` prints it.
type row struct {
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

// lister writes rows as they come.
type lister struct {
	w     io.Writer
	json  bool
	names bool
	now   time.Time
	n     int
	tw    *tabwriter.Writer
	enc   *json.Encoder
}

func newLister(w io.Writer, asJSON, names bool, now time.Time) *lister {
	l := &lister{w: w, json: asJSON, names: names, now: now}
	if asJSON {
		io.WriteString(w, `{"tasks":[`)
		l.enc = json.NewEncoder(w)
	} else {
		l.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return l
}

func (l *lister) add(name string, t api.Task) {
	r := row{Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority, Bytes: t.Bytes, State: t.State,
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
		// The store's strings came from clients and children: escaped.
		esc := safetext.Escape
		if l.names {
			fmt.Fprintf(l.tw, "%s\t", esc(name))
		}
		fmt.Fprintf(l.tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", esc(r.Ticket), esc(r.Tool), esc(r.Priority), policy.FormatSize(r.Bytes),
			esc(r.State), r.Attempts, time.Duration(r.AgeSeconds*float64(time.Second)).Round(time.Second), oneLine(r.LastError))
		if l.n%1000 == 999 {
			l.tw.Flush() // the columns of a long list are aligned per thousand rows
		}
	}
	l.n++
}

func (l *lister) close() error {
	if l.json {
		_, err := io.WriteString(l.w, "]}\n")
		return err
	}
	if l.n == 0 {
		io.WriteString(l.tw, "no deferred tasks\n")
	}
	return l.tw.Flush()
}

// oneLine is a last error for one table cell: its lines joined, escaped
// (safetext), at most 60 characters (cut between characters, never
// inside one).
func oneLine(s string) string {
	s = safetext.Escape(strings.ReplaceAll(s, "\n", " "))
	if utf8.RuneCountInString(s) > 60 {
		return string([]rune(s)[:57]) + "..."
	}
	return s
}
