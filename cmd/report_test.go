package cmd

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/journal"
)

var reportNow = time.Date(2025, 3, 1, 13, 0, 0, 0, time.UTC)

// writeJournal writes events (times as offsets before reportNow) to
// <root>/<name>/events.jsonl through the real journal.
func writeJournal(t *testing.T, root, name string, events ...api.Event) {
	t.Helper()
	j, err := journal.Open(filepath.Join(root, name, "events.jsonl"), journal.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		ev.Name = name
		j.Observe(ev)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func ago(d time.Duration) time.Time { return reportNow.Add(-d) }

func llamaEvents() []api.Event {
	one, zero := 1, 0
	return []api.Event{
		{Time: ago(time.Hour), Event: api.EventStart, Profile: "fp16"},
		{Time: ago(30 * time.Minute), Event: api.EventStepDown, Reason: api.ReasonWatermark, Profile: "fp16",
			From: "fp16", To: "int8", FromLevel: &zero, ToLevel: &one},
		{Time: ago(10 * time.Minute), Event: api.EventExit, Profile: "int8", Level: 1},
	}
}

// runReportCmd runs `gpuguard report args...` with GPUGUARD_STATE_DIR and
// GPUGUARD_RUNTIME_DIR pointing at temp dirs and a fixed clock.
func runReportCmd(t *testing.T, stateRoot, runtimeDir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runReportCmdAt(t, reportNow, stateRoot, runtimeDir, args...)
}

// runReportCmdAt is runReportCmd with the clock at now.
func runReportCmdAt(t *testing.T, now time.Time, stateRoot, runtimeDir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"GPUGUARD_STATE_DIR": stateRoot, "GPUGUARD_RUNTIME_DIR": runtimeDir}
	stdio := &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Getenv: func(k string) string { return env[k] }}
	root := NewRootCmd(stdio)
	// Swap in a report command with a fixed clock.
	for _, c := range root.Commands() {
		if c.Name() == "report" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(NewCmdReport(stdio, func(o *ReportOptions) error {
		o.Now = func() time.Time { return now }
		return runReport(o)
	}))
	root.SetArgs(append([]string{"report"}, args...))
	err := root.Execute()
	if err != nil {
		var ee *ExitError
		if !asExit(err, &ee) || ee.Err != nil {
			errOut.WriteString("gpuguard: " + err.Error() + "\n")
		}
	}
	return exitCode(err), out.String(), errOut.String()
}

func TestReportJSON(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	writeJournal(t, root, "llama", llamaEvents()...)
	code, out, errOut := runReportCmd(t, root, run, "llama", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Name             string             `json:"name"`
		Live             bool               `json:"live"`
		Stepdowns        int                `json:"stepdowns"`
		SecondsInProfile map[string]float64 `json:"seconds_in_profile"`
		FallbackRate     float64            `json:"fallback_rate"`
		Restarts         map[string]int     `json:"restarts"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Name != "llama" || got.Live || got.Stepdowns != 1 ||
		got.SecondsInProfile["fp16"] != 1800 || got.SecondsInProfile["int8"] != 1200 || got.FallbackRate != 0.4 {
		t.Errorf("report = %+v", got)
	}
}

// TestReportBudget: budget and over_budget in the JSON follow --budget,
// judged on degraded_rate (0.4 here: 20 of 50 minutes in int8).
func TestReportBudget(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	writeJournal(t, root, "llama", llamaEvents()...)
	for _, c := range []struct {
		args   []string
		budget float64
		over   bool
	}{
		{nil, 0.05, true},
		{[]string{"--budget", "0.5"}, 0.5, false},
		{[]string{"--budget", "0.4"}, 0.4, false},
		{[]string{"--budget", "0"}, 0, true},
	} {
		code, out, errOut := runReportCmd(t, root, run, append([]string{"llama", "--json"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", c.args, code, errOut)
		}
		var got struct {
			Degraded *float64 `json:"degraded_rate"`
			Budget   *float64 `json:"budget"`
			Over     *bool    `json:"over_budget"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.Degraded == nil || got.Budget == nil || got.Over == nil {
			t.Fatalf("%q: %v\n%s", c.args, err, out)
		}
		if *got.Degraded != 0.4 || *got.Budget != c.budget || *got.Over != c.over {
			t.Errorf("%q: degraded %v budget %v over %v, want 0.4 %v %v", c.args, *got.Degraded, *got.Budget, *got.Over, c.budget, c.over)
		}
	}
	// The text report warns by the same judgement.
	_, out, _ := runReportCmd(t, root, run, "llama", "--budget", "0.5")
	if strings.Contains(out, "warning") {
		t.Errorf("within --budget 0.5, the text warns:\n%s", out)
	}
	_, out, _ = runReportCmd(t, root, run, "llama")
	if !strings.Contains(out, "warning: llama ran below its best profile fp16 40.0% of the time (budget 5.0%), mostly in int8") {
		t.Errorf("over the default budget, no warning:\n%s", out)
	}
}

func TestReportLiveAndSince(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	evs := llamaEvents()[:2] // still running in int8
	writeJournal(t, root, "llama", evs...)
	ln, err := net.Listen("unix", filepath.Join(run, "llama.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, out, errOut := runReportCmd(t, root, run, "llama", "--json", "--since", "15m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Live             bool               `json:"live"`
		Stepdowns        int                `json:"stepdowns"`
		SecondsInProfile map[string]float64 `json:"seconds_in_profile"`
	}
	json.Unmarshal([]byte(out), &got)
	if !got.Live || got.Stepdowns != 0 || got.SecondsInProfile["int8"] != 900 || len(got.SecondsInProfile) != 1 {
		t.Errorf("live report of the last 15m = %+v", got)
	}
}

func TestReportTextSkippedLines(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	writeJournal(t, root, "llama", llamaEvents()...)
	f, _ := os.OpenFile(filepath.Join(root, "llama", "events.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2025-03-01T12:55:00Z","event":"sta`) // torn by a crash
	f.Close()
	code, out, errOut := runReportCmd(t, root, run, "llama")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"llama (not running)", "skipped 1 unreadable journal line", "warning:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, _, errOut = runReportCmd(t, root, run, "llama", "--json")
	if code != 0 || !strings.Contains(errOut, "skipped 1") {
		t.Errorf("--json: exit %d, stderr %q; want 0 and a note about the skipped line", code, errOut)
	}
	code, _, errOut = runReportCmd(t, root, run, "llama", "--html", filepath.Join(t.TempDir(), "review.html"))
	if code != 0 || !strings.Contains(errOut, "llama: skipped 1 unreadable journal line") {
		t.Errorf("--html: exit %d, stderr %q; want 0 and a note about the skipped line", code, errOut)
	}
}

func TestReportWithoutName(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	writeJournal(t, root, "llama", llamaEvents()...)
	os.MkdirAll(filepath.Join(root, "no-journal"), 0o700)

	code, out, _ := runReportCmd(t, root, run, "--json")
	if code != 0 || !strings.Contains(out, `"name": "llama"`) || strings.Contains(out, "instances") {
		t.Fatalf("one instance: exit %d\n%s", code, out)
	}

	writeJournal(t, root, "mistral", llamaEvents()...)
	code, out, _ = runReportCmd(t, root, run, "--json")
	var many struct {
		Instances []struct{ Name string } `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &many); code != 0 || err != nil || len(many.Instances) != 2 {
		t.Fatalf("two instances: exit %d, %v\n%s", code, err, out)
	}
	code, out, _ = runReportCmd(t, root, run)
	if code != 0 || !strings.Contains(out, "llama (") || !strings.Contains(out, "mistral (") {
		t.Errorf("text for two instances: exit %d\n%s", code, out)
	}
}

func TestReportStateDirFlag(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	// The journal's own name wins over the directory's.
	j, _ := journal.Open(filepath.Join(root, "dir", "events.jsonl"), journal.Options{})
	for _, ev := range llamaEvents() {
		ev.Name = "llama"
		j.Observe(ev)
	}
	j.Close()
	code, out, errOut := runReportCmd(t, t.TempDir(), run, "--state-dir", filepath.Join(root, "dir"), "--json")
	if code != 0 || !strings.Contains(out, `"name": "llama"`) || errOut != "" {
		t.Errorf("exit %d %s\n%s", code, errOut, out)
	}
	// The right name with it: no warning.
	code, out, errOut = runReportCmd(t, t.TempDir(), run, "llama", "--state-dir", filepath.Join(root, "dir"), "--json")
	if code != 0 || !strings.Contains(out, `"name": "llama"`) || errOut != "" {
		t.Errorf("matching name: exit %d %s\n%s", code, errOut, out)
	}
	// Another instance's name with it: reported as whose journal it is,
	// and said so.
	code, out, errOut = runReportCmd(t, t.TempDir(), run, "mistral", "--state-dir", filepath.Join(root, "dir"), "--json")
	if code != 0 || !strings.Contains(out, `"name": "llama"`) || !strings.Contains(errOut, "is instance llama's, not mistral's") {
		t.Errorf("mismatched name: exit %d %s\n%s", code, errOut, out)
	}
}

func TestReportExitCodes(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"nosuch"}, ExitFailure},
		{[]string{}, ExitFailure}, // no instance at all
		{[]string{"--state-dir", t.TempDir()}, ExitFailure},
		{[]string{"a", "b"}, ExitUsage},
		{[]string{"--since", "soon"}, ExitUsage},
		{[]string{"--since", "-1h", "x"}, ExitUsage},
		{[]string{"../etc"}, ExitUsage},
		{[]string{"--bogus"}, ExitUsage},
		{[]string{"--budget", "1.5", "x"}, ExitUsage},
		{[]string{"--budget", "-0.1", "x"}, ExitUsage},
		{[]string{"--budget", "NaN", "x"}, ExitUsage},
		{[]string{"--budget", "5%", "x"}, ExitUsage},
	} {
		code, _, errOut := runReportCmd(t, root, run, tt.args...)
		if code != tt.code {
			t.Errorf("report %q: exit %d, want %d (%s)", tt.args, code, tt.code, errOut)
		}
		if code == ExitFailure && errOut == "" {
			t.Errorf("report %q: exit 1 without a message", tt.args)
		}
	}
}
