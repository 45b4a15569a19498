package core

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// TestStarts: the start rule, one run of launches and exits a row
// (a ready one says so between them). start_retries
// failed exits in a row, each before start_secs and before ready, give up
// at once with the child's status; an OOM (the ladder's business), a ready
// child, a child that ran start_secs, and start_secs = 0 all keep the
// usual restarts.
func TestStarts(t *testing.T) {
	type exit struct {
		e     Exit
		ran   time.Duration
		ready bool
		want  string
	}
	crash, oom := Exit{Code: 2}, Exit{Code: 42}
	quick := 100 * time.Millisecond
	for _, tc := range []struct {
		name  string
		pol   func(*policy.Restart)
		exits []exit
	}{
		{"start_retries quick exits in a row give up at once", nil, []exit{
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 1s"},
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 2s"},
			{crash, quick, false, "journal giveup; log; finish fatal 1/2"},
		}},
		{"start_retries = 1 gives up at the first", func(r *policy.Restart) { r.StartRetries = 1 }, []exit{
			{crash, quick, false, "journal giveup; log; finish fatal 1/2"},
		}},
		{"an OOM at load walks the ladder", nil, []exit{
			{oom, quick, false, "journal oom; count oom to 1; log; relaunch 1 after 1s"},
			{oom, quick, false, "journal oom; count oom to 1; log; relaunch 1 after 2s"},
			{oom, quick, false, "journal oom; count oom to 1; log; relaunch 1 after 4s"},
			{oom, quick, false, "journal oom; count oom to 1; log; relaunch 1 after 4s"},
		}},
		{"an OOM between quick exits breaks the run", nil, []exit{
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 1s"},
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 2s"},
			{oom, quick, false, "journal oom; count oom to 1; log; relaunch 1 after 4s"},
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 4s"},
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 4s"},
		}},
		{"a child that ran start_secs once gets the usual backoff", nil, []exit{
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 1s"},
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 2s"},
			{crash, 5 * time.Second, false, "count crash to 0; log; relaunch 0 after 4s"},
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 4s"},
			{crash, quick, false, "count crash to 0; log; relaunch 0 after 4s"}, // 2 in a row since
		}},
		{"a child that said ready has started", nil, []exit{
			{crash, quick, true, "count crash to 0; log; relaunch 0 after 1s"},
			{crash, quick, true, "count crash to 0; log; relaunch 0 after 2s"},
			{crash, quick, true, "count crash to 0; log; relaunch 0 after 4s"},
		}},
		{"start_secs = 0 turns the rule off", func(r *policy.Restart) { r.StartSecs = 0 }, []exit{
			{crash, 0, false, "count crash to 0; log; relaunch 0 after 1s"},
			{crash, 0, false, "count crash to 0; log; relaunch 0 after 2s"},
			{crash, 0, false, "count crash to 0; log; relaunch 0 after 4s"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := testPolicy()
			pol.Restart.StartSecs, pol.Restart.StartRetries = 5*time.Second, 3
			if tc.pol != nil {
				tc.pol(&pol.Restart)
			}
			var st State
			g := Given{Policy: pol}
			for i, x := range tc.exits {
				now := t0.Add(time.Duration(i) * time.Second)
				st, _ = Decide(st, g, Launched{Now: now.Add(-x.ran)})
				if x.ready {
					st, _ = Decide(st, g, Ready{Why: "the child said ready"})
				}
				var effs []Effect
				st, effs = Decide(st, g, Exited{Now: now, Exit: x.e, Ran: x.ran})
				if got := briefs(effs); got != x.want {
					t.Fatalf("exit %d:\n got %q\nwant %q", i, got, x.want)
				}
			}
		})
	}
}

// TestStartsTexts: the give-up names the rule, the status and the child's
// last stderr line; a quick exit's restart line counts toward it.
func TestStartsTexts(t *testing.T) {
	pol := testPolicy()
	pol.Restart.StartSecs, pol.Restart.StartRetries = 5*time.Second, 2
	stderr := []byte("Traceback (most recent call last):\n  File \"x\"\nFileNotFoundError: [Errno 2] No such file: 'serve.py'\n\n")
	g := Given{Policy: pol}
	var st State
	st, effs := Decide(st, g, Exited{Now: time.Unix(0, 0), Exit: Exit{Code: 2, Stderr: stderr}, Ran: 110 * time.Millisecond})
	if l := effs[1].(Log); !strings.Contains(l.Text, "restarting (1 of 5) after backoff 1s; it ran 110ms, under start_secs (5s): 1 of 2 such exits in a row") {
		t.Errorf("the quick exit's restart line: %q", l.Text)
	}
	_, effs = Decide(st, g, Exited{Now: time.Unix(1, 0), Exit: Exit{Code: 2, Stderr: stderr}, Ran: 90 * time.Millisecond})
	j, l := effs[0].(Journal), effs[1].(Log)
	want := `the child never started: 2 exits in a row, each before start_secs (5s) and before any ready; the last with status 2 after 90ms; ` +
		`its last stderr line: "FileNotFoundError: [Errno 2] No such file: 'serve.py'"`
	if j.Event.Event != api.EventGiveUp || j.Event.Detail != want || *j.Event.Status != 2 || len(j.Event.Stderr) != 3 {
		t.Errorf("the giveup event: %+v", j.Event)
	}
	if l.Text != "giving up: "+want {
		t.Errorf("the log line: %q\nwant %q", l.Text, "giving up: "+want)
	}
	// 200 bytes end in the middle of an é: the cut drops its half.
	if got := lastLine([]byte("a" + strings.Repeat("é", 150))); len(got) != 199+len("...") || !utf8.ValidString(got) || !strings.HasSuffix(got, "é...") {
		t.Errorf("a long line is cut on a character: %q", got)
	}
}
