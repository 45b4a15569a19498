package cmd

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/journal"
	"github.com/gpuguard/gpuguard/internal/metrics"
	"github.com/gpuguard/gpuguard/internal/reload"
	"github.com/gpuguard/gpuguard/policy"
)

// limitsRecorder is a journal that keeps the limits it is given.
type limitsRecorder struct {
	mu  sync.Mutex
	got []journal.Limits
}

func (l *limitsRecorder) SetLimits(x journal.Limits) {
	l.mu.Lock()
	l.got = append(l.got, x)
	l.mu.Unlock()
}

// reloadRun resolves a run of the policy text (written to a file) with o's
// flags, as `gpuguard run` does, and returns its reloader, the file's path
// and the run's resolved policy.
func reloadRun(t *testing.T, text string, o RunOptions) (*reload.Reloader, string, *policy.Policy, *limitsRecorder) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.toml")
	rewrite(t, path, text)
	o.IO = &IO{Getenv: func(k string) string { return map[string]string{"GPUGUARD_STATE_DIR": dir}[k] }}
	o.PolicyFile, o.SimMemory, o.SimDevices = path, "1GiB", 1
	r, err := resolveRun(&o)
	if err != nil {
		t.Fatal(err)
	}
	ep := metrics.NewEndpoint(http.NotFoundHandler())
	t.Cleanup(ep.Close)
	mv, err := ep.Prepare(r.pol.Metrics.Listen)
	if err != nil {
		t.Fatal(err)
	}
	mv.Commit()
	lr := &limitsRecorder{}
	return newReloader(&o, r, ep, lr, nil), path, r.pol, lr
}

func rewrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const reloadBase = `name = "llama"
command = ["serve", "--batch", "${MAX_BATCH}"]
priority = 5
[watch]
backend = "sim"
interval = "200ms"
[[profile]]
name = "fp16"
env = { MAX_BATCH = "32" }
`

// TestReloadFlagsStillWin: the flags the run was given override the
// reloaded file as they did the first: a reload that changes only keys a
// flag fixes changes nothing else.
func TestReloadFlagsStillWin(t *testing.T) {
	iv, sim, none := time.Second, "sim", ""
	rr, path, cur, _ := reloadRun(t, reloadBase, RunOptions{Interval: &iv, Priority: ptrTo(-3), Backend: &sim, MetricsAddr: &none})
	rewrite(t, path, strings.NewReplacer(`priority = 5`, `priority = 9`, `interval = "200ms"`, `interval = "50ms"`,
		`backend = "sim"`, `backend = "nvml"`).Replace(reloadBase)+"[watermark]\nhigh = 0.8\n[metrics]\nlisten = \"127.0.0.1:1\"\n")
	rl, err := rr.Load(cur)
	if err != nil {
		t.Fatal(err)
	}
	p := rl.Policy
	if p.Priority != -3 || p.Watch.Interval != time.Second || p.Watch.Backend != "sim" || p.Metrics.Listen != "" || p.Watermark.High != 0.8 {
		t.Errorf("reloaded priority %d interval %s backend %s listen %q high %v; want the flags' -3, 1s, sim, \"\" and the file's 0.8",
			p.Priority, p.Watch.Interval, p.Watch.Backend, p.Metrics.Listen, p.Watermark.High)
	}
	if got := policy.Diff(cur, p); !slices.Equal(got, []string{"watermark.high"}) {
		t.Errorf("changed %q, want only watermark.high", got)
	}
	if rl.Commit != nil || rl.Abort != nil {
		t.Error("nothing outside the loop changed, yet there is something to commit")
	}
	if !slices.Equal(rl.Command, []string{"serve", "--batch", "${MAX_BATCH}"}) {
		t.Errorf("command %q", rl.Command)
	}

	// --name and -- CMD win over name and command: a new name is no
	// rename, a new command runs nowhere.
	rr, path, cur, _ = reloadRun(t, reloadBase, RunOptions{Name: "fixed", Command: []string{"cmdline", "${MAX_BATCH}"}})
	rewrite(t, path, strings.NewReplacer(`"llama"`, `"alpaca"`, `"serve"`, `"other"`).Replace(reloadBase))
	if rl, err = rr.Load(cur); err != nil {
		t.Fatal(err)
	}
	if got := policy.Diff(cur, rl.Policy); len(got) != 0 || !slices.Equal(rl.Command, []string{"cmdline", "${MAX_BATCH}"}) {
		t.Errorf("changed %q, command %q; want nothing and the command line's", got, rl.Command)
	}
}

// TestReloadRefused: every way a file is refused lists its problems with
// the file, the line and the key, and the next reload works once the file
// is back.
func TestReloadRefused(t *testing.T) {
	const fifo = "\x00fifo" // next: the file becomes a FIFO
	tests := []struct {
		name  string
		start string
		o     RunOptions
		next  string // "" removes the file
		want  []string
	}{
		{"invalid", reloadBase, RunOptions{},
			strings.Replace(reloadBase, "priority = 5", "priority = 5000", 1) + "[watermark]\nhigh = 0.99\n",
			[]string{"p.toml:3: priority: ", "p.toml:11: watermark.high: must be below watermark.critical"}},
		{"renamed", reloadBase, RunOptions{}, strings.Replace(reloadBase, `"llama"`, `"alpaca"`, 1),
			[]string{`p.toml:1: name: would rename the instance from "llama" to "alpaca"`}},
		{"renamed through the command", "command = [\"/usr/bin/serve\"]\n[watch]\nbackend = \"sim\"\n", RunOptions{},
			"command = [\"/usr/bin/other\"]\n[watch]\nbackend = \"sim\"\n",
			[]string{`p.toml:1: command: would rename the instance from "serve" to "other"`}},
		{"another backend", reloadBase, RunOptions{}, strings.Replace(reloadBase, `backend = "sim"`, `backend = "nvml"`, 1),
			[]string{`p.toml:5: watch.backend: changed from "sim" to "nvml"`}},
		{"another task store", reloadBase, RunOptions{}, reloadBase + "[defer]\nstore = \"redis://:pw@127.0.0.1:6379/0\"\n",
			[]string{`p.toml:` + fmt.Sprint(strings.Count(reloadBase, "\n")+2) + `: defer.store: changed from "" to "redis://:xxxxx@127.0.0.1:6379/0"`}},
		{"no command left", reloadBase, RunOptions{}, strings.Replace(reloadBase, `command = ["serve", "--batch", "${MAX_BATCH}"]`, "", 1),
			[]string{"p.toml: no command to run"}},
		{"gone", reloadBase, RunOptions{}, "", []string{"p.toml: cannot read policy: no such file or directory"}},
		// A FIFO nobody writes held this reload, and every later one (they
		// take turns), for ever.
		{"a FIFO", reloadBase, RunOptions{}, fifo, []string{"p.toml: cannot read policy: not a regular file (a FIFO)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr, path, cur, _ := reloadRun(t, tt.start, tt.o)
			switch tt.next {
			case "":
				os.Remove(path)
			case fifo:
				os.Remove(path)
				if err := syscall.Mkfifo(path, 0o644); err != nil {
					t.Fatal(err)
				}
			default:
				rewrite(t, path, tt.next)
			}
			_, err := rr.Load(cur)
			var list policy.ErrorList
			if !errors.As(err, &list) || len(list) != len(tt.want) {
				t.Fatalf("Load: %v; want %d problems", err, len(tt.want))
			}
			for i, want := range tt.want {
				if got := list[i].Error(); !strings.HasPrefix(got, filepath.Dir(path)+"/"+want) {
					t.Errorf("problem %d: %q, want it to start with %q", i, got, want)
				}
			}
			// Nothing is held by the refusal: once the file is back, the
			// next reload loads it (a FIFO's read held every later one).
			os.Remove(path)
			rewrite(t, path, tt.start)
			if _, err := rr.Load(cur); err != nil {
				t.Errorf("the next reload, the file back: %v", err)
			}
		})
	}
}

// TestReloadMetricsAddress: a new [metrics] listen address is bound before
// anything changes: in use, the reload is refused and the old address
// serves on; free, Commit moves there and Abort lets it go.
func TestReloadMetricsAddress(t *testing.T) {
	a, b := freeAddr(t), freeAddr(t)
	with := func(addr string) string { return reloadBase + "[metrics]\nlisten = \"" + addr + "\"\n" }
	rr, path, cur, _ := reloadRun(t, with(a), RunOptions{})
	if rr.Metrics.Addr() != a {
		t.Fatalf("serving on %q, want %s", rr.Metrics.Addr(), a)
	}
	rewrite(t, path, with(b))
	blocker, err := metrics.Listen(b)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rr.Load(cur)
	var list policy.ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].Key != "metrics.listen" || list[0].Line != 11 || !strings.Contains(list[0].Msg, b) {
		t.Fatalf("Load with the port in use: %v", err)
	}
	blocker.Close()
	if rr.Metrics.Addr() != a {
		t.Fatalf("a refused reload moved the metrics to %q", rr.Metrics.Addr())
	}
	rl, err := rr.Load(cur)
	if err != nil {
		t.Fatal(err)
	}
	rl.Abort()
	if rr.Metrics.Addr() != a {
		t.Fatalf("an aborted reload moved the metrics to %q", rr.Metrics.Addr())
	}
	rl, err = rr.Load(cur)
	if err != nil {
		t.Fatal(err)
	}
	rl.Commit()
	if rr.Metrics.Addr() != b {
		t.Fatalf("after the reload serving on %q, want %s", rr.Metrics.Addr(), b)
	}
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := metrics.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestReloadJournalLimits: changed [journal] keys reach the journal at
// Commit, as at start (max_files = 0 keeps no rotated file).
func TestReloadJournalLimits(t *testing.T) {
	rr, path, cur, lr := reloadRun(t, reloadBase, RunOptions{})
	rewrite(t, path, reloadBase+"[journal]\nmax_size = \"1MiB\"\nmax_files = 0\nmax_age = \"180d\"\n")
	rl, err := rr.Load(cur)
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.got) != 0 {
		t.Fatal("limits set before Commit")
	}
	rl.Commit()
	want := journal.Limits{MaxBytes: 1 << 20, MaxFiles: -1, MaxAge: 180 * policy.Day}
	if len(lr.got) != 1 || lr.got[0] != want {
		t.Fatalf("limits %+v, want %+v", lr.got, want)
	}
}
