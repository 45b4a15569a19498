package policy

import (
	"strings"
	"testing"
	"time"
)

func TestDeferErrors(t *testing.T) {
	for _, c := range []struct{ toml, key, msg string }{
		{`store = "http://x:1"`, "defer.store", "redis://"},
		{`store = "redis://host"`, "defer.store", "HOST:PORT"},
		{`store = "redis://host:99999/0"`, "defer.store", "invalid port"},
		{`store = "redis://host:6379/x"`, "defer.store", "database"},
		{`store = "redis://:pw@host/0"`, "defer.store", "HOST:PORT"},
		{`window = "01:00"`, "defer.window", "HH:MM-HH:MM"},
		{`window = "25:00-06:00"`, "defer.window", "time of day"},
		{`window = "01:00-01:00"`, "defer.window", "never be open"},
		{`window = "1:5-06:00"`, "defer.window", "time of day"},
		{`ack_timeout = "10ms"`, "defer.ack_timeout", ""},
		{`max_attempts = 0`, "defer.max_attempts", ""},
		{`max_tasks = 0`, "defer.max_tasks", ""},
		{`keep_results = "-1s"`, "defer.keep_results", ""},
		{`bogus = 1`, "defer.bogus", ""},
	} {
		src := "[defer]\n" + c.toml + "\n"
		_, err := Parse([]byte(src), "p.toml")
		if err == nil {
			t.Errorf("%s: accepted", c.toml)
			continue
		}
		list := err.(ErrorList)
		e := list[0]
		if e.Key != c.key || e.Line != 2 || e.File != "p.toml" || !strings.Contains(e.Error(), c.msg) {
			t.Errorf("%s: %v (key %q line %d), want key %s line 2 mentioning %q", c.toml, err, e.Key, e.Line, c.key, c.msg)
		}
		if strings.Contains(e.Error(), ":pw@") {
			t.Errorf("%s: the password is in the error: %v", c.toml, err)
		}
	}
}

func TestDeferAccepts(t *testing.T) {
	p, err := Parse([]byte("[defer]\nstore = \"redis://127.0.0.1:6379\"\nwindow = \"00:00-24:00\"\nkeep_results = \"0s\"\n"), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Defer.Store != "redis://127.0.0.1:6379" || p.Defer.Window.String() != "00:00-24:00" || p.Defer.KeepResults != 0 {
		t.Fatalf("%+v", p.Defer)
	}
}

func TestWindow(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 3, 10, h, m, 0, 0, time.UTC) }
	for _, c := range []struct {
		w    string
		t    time.Time
		open bool
		next time.Time
	}{
		{"", at(12, 0), true, at(12, 0)},
		{"01:00-06:00", at(0, 59), false, at(1, 0)},
		{"01:00-06:00", at(1, 0), true, at(1, 0)}, // the start is inclusive
		{"01:00-06:00", at(5, 59), true, at(5, 59)},
		{"01:00-06:00", at(6, 0), false, at(1, 0).AddDate(0, 0, 1)}, // the end is exclusive
		{"01:00-06:00", at(6, 0).Add(-time.Nanosecond), true, at(6, 0).Add(-time.Nanosecond)},
		{"22:00-06:00", at(23, 0), true, at(23, 0)}, // wraps midnight
		{"22:00-06:00", at(3, 0), true, at(3, 0)},
		{"22:00-06:00", at(6, 0), false, at(22, 0)},
		{"22:00-06:00", at(21, 59), false, at(22, 0)},
		{"22:00-06:00", at(22, 0), true, at(22, 0)},
	} {
		w, err := ParseWindow(c.w)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Open(c.t); got != c.open {
			t.Errorf("%q at %s: open %v, want %v", c.w, c.t.Format("15:04:05.999999999"), got, c.open)
		}
		if got := w.NextOpen(c.t); !got.Equal(c.next) {
			t.Errorf("%q at %s: next open %v, want %v", c.w, c.t.Format("15:04"), got, c.next)
		}
	}
}

// The window is local time: across a DST change it keeps its wall-clock
// times.
func TestWindowLocalAcrossDST(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	w, _ := ParseWindow("01:00-06:00")
	// 2026-03-29: clocks jump from 02:00 to 03:00.
	before := time.Date(2026, 3, 28, 12, 0, 0, 0, loc)
	next := w.NextOpen(before)
	if want := time.Date(2026, 3, 29, 1, 0, 0, 0, loc); !next.Equal(want) {
		t.Fatalf("next open %v, want %v", next, want)
	}
	if !w.Open(time.Date(2026, 3, 29, 5, 30, 0, 0, loc)) {
		t.Fatal("closed at 05:30 local on the day of the change")
	}
	if w.Open(time.Date(2026, 3, 29, 6, 15, 0, 0, loc)) {
		t.Fatal("open at 06:15 local on the day of the change")
	}
}
