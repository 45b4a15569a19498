package supervisor

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

type eventList []api.Event

func (e *eventList) Observe(ev api.Event) { *e = append(*e, ev) }

// TestReporterStampsAndKeepsLast: every observer gets each event with the
// instance's name and a time (its own when set), and the newest is kept
// for status.
func TestReporterStampsAndKeepsLast(t *testing.T) {
	var a, b eventList
	r := newReporter("inst", []Observer{&a, &b}, nil)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.Emit(api.Event{Event: api.EventStart, Time: at})
	r.Emit(api.Event{Event: api.EventStop})
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("observers got %d and %d events, want 2 each", len(a), len(b))
	}
	if a[0].Name != "inst" || !a[0].Time.Equal(at) || a[1].Time.IsZero() {
		t.Fatalf("events %+v: want the name stamped, a set time kept, an unset one filled", a)
	}
	if r.last == nil || r.last.Event != api.EventStop {
		t.Fatalf("last = %+v, want the stop", r.last)
	}
}

// TestReporterStampsProfileInForce: an event that names no profile is
// journaled in the one in force when it is emitted; one that names its
// own (a reload's, which names the profile it left) keeps it. Log lines
// go to the log, and a reporter without one drops them.
func TestReporterStampsProfileInForce(t *testing.T) {
	var got eventList
	var lines []string
	r := newReporter("inst", []Observer{&got}, nil)
	profile, level := "full", 0
	r.inForce = func() (string, int) { return profile, level }
	r.log = func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	r.Emit(api.Event{Event: api.EventStart})
	profile, level = "small", 1
	r.Emit(api.Event{Event: api.EventStepDown})
	r.Emit(api.Event{Event: api.EventReload, Profile: "old", Level: 3})
	want := []struct {
		profile string
		level   int
	}{{"full", 0}, {"small", 1}, {"old", 3}}
	for i, w := range want {
		if got[i].Profile != w.profile || got[i].Level != w.level {
			t.Fatalf("event %d in %s (%d), want %s (%d)", i, got[i].Profile, got[i].Level, w.profile, w.level)
		}
	}
	r.Logf("a %s", "line")
	if len(lines) != 1 || lines[0] != "a line" {
		t.Fatalf("log lines %q, want [a line]", lines)
	}
	quiet := newReporter("inst", nil, nil)
	quiet.Logf("dropped") // must not panic
	quiet.Emit(api.Event{Event: api.EventStart})
	if quiet.last.Profile != "" {
		t.Fatalf("without inForce the event was stamped %q", quiet.last.Profile)
	}
}

// TestReporterStatusOnlyOnChange: the service manager hears the status
// line when it changes, not again on every sample; without a notifier
// nothing is sent.
func TestReporterStatusOnlyOnChange(t *testing.T) {
	n := &fakeNotifier{}
	r := newReporter("inst", nil, n)
	r.status(api.StateRunning, "full", 0, 2, 0.5)
	r.status(api.StateRunning, "full", 0, 2, 0.5)
	r.status(api.StateRunning, "full", 0, 2, 0.7)
	if got := n.count("STATUS"); got != 2 {
		t.Fatalf("STATUS sent %d times, want 2", got)
	}
	if want := "running: profile full (0/2), watermark 0.70"; r.text != want {
		t.Fatalf("text %q, want %q", r.text, want)
	}
	quiet := newReporter("inst", nil, nil)
	quiet.status(api.StateRunning, "full", 0, 2, 0.5) // must not panic
}
