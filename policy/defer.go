package policy

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defer is [defer]: where deferred tasks are kept and when they run.
type Defer struct {
	// Store is "" (SQLite in <state-dir>/deferred/) or a redis:// URL.
	Store string
	// Window limits delivery to a time of day; the zero Window is always
	// open.
	Window      Window
	AckTimeout  time.Duration
	MaxAttempts int
	MaxTasks    int
	KeepResults time.Duration
}

// Bounds of [defer].
const (
	// MaxDeferAttempts and MaxDeferTasks bound what a typo can ask for.
	MaxDeferAttempts = 1000
	MaxDeferTasks    = 10_000_000
	// minAckTimeout keeps a task from timing out before it could start.
	minAckTimeout = time.Second
)

func defaultDefer() Defer {
	return Defer{AckTimeout: 10 * time.Minute, MaxAttempts: 5, MaxTasks: 100_000, KeepResults: 24 * time.Hour}
}

// Window is a daily time window in local time, [Start, End) in minutes
// after midnight; End < Start wraps past midnight ("22:00-06:00").
type Window struct {
	Start, End int
	Set        bool // false: no window, always open
}

// String is the window as policy.toml writes it ("" when none).
func (w Window) String() string {
	if !w.Set {
		return ""
	}
	return fmt.Sprintf("%02d:%02d-%02d:%02d", w.Start/60, w.Start%60, w.End/60, w.End%60)
}

// ParseWindow reads "HH:MM-HH:MM" ("" is no window). Start and end must
// differ: an empty window would never run a task.
func ParseWindow(s string) (Window, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Window{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return Window{}, fmt.Errorf("want HH:MM-HH:MM such as \"01:00-06:00\", got %q", s)
	}
	start, err := parseClock(a)
	if err != nil {
		return Window{}, err
	}
	end, err := parseClock(b)
	if err != nil {
		return Window{}, err
	}
	if start == end {
		return Window{}, fmt.Errorf("%q starts and ends at the same time: it would never be open", s)
	}
	return Window{Start: start, End: end, Set: true}, nil
}

func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || len(m) != 2 || hh < 0 || hh > 24 || mm < 0 || mm > 59 || (hh == 24 && mm != 0) {
		return 0, fmt.Errorf("%q is not a time of day HH:MM (00:00 to 24:00)", s)
	}
	return hh*60 + mm, nil
}

// minuteOf is t's minute of its (local) day, with the seconds as a
// fraction, so that a window's end is exclusive to the nanosecond.
func minuteOf(t time.Time) time.Duration {
	// The wall clock's reading, not the time since midnight: on a day a
	// clock change shortens, 06:15 is still 06:15.
	h, m, s := t.Clock()
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second + time.Duration(t.Nanosecond())
}

// Open reports whether t (in its location, local time for time.Now) is in
// the window: from its start (inclusive) to its end (exclusive).
func (w Window) Open(t time.Time) bool {
	if !w.Set {
		return true
	}
	m := minuteOf(t)
	start, end := time.Duration(w.Start)*time.Minute, time.Duration(w.End)*time.Minute
	if start < end {
		return m >= start && m < end
	}
	return m >= start || m < end
}

// NextOpen is when the window next opens after t, when it is closed at t
// (t itself when open). It is computed on the calendar, so a day that a
// clock change makes 23 or 25 hours long keeps the window's wall-clock
// times.
func (w Window) NextOpen(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	y, mo, d := t.Date()
	at := time.Date(y, mo, d, w.Start/60, w.Start%60, 0, 0, t.Location())
	if !at.After(t) {
		at = time.Date(y, mo, d+1, w.Start/60, w.Start%60, 0, 0, t.Location())
	}
	return at
}

// deferFields decodes [defer].
func (d *decoder) deferFields(df *Defer) []field {
	return []field{
		{"store", set(&df.Store, func(p path, v any) (string, bool) {
			s, ok := d.val.str(p, v)
			if !ok || s == "" {
				return s, ok
			}
			if err := checkStoreURL(s); err != nil {
				d.out.errorf(p, "%v", err)
				return "", false
			}
			return s, true
		})},
		{"window", set(&df.Window, func(p path, v any) (Window, bool) {
			s, ok := d.val.str(p, v)
			if !ok {
				return Window{}, false
			}
			w, err := ParseWindow(s)
			if err != nil {
				d.out.errorf(p, "%v", err)
				return Window{}, false
			}
			return w, true
		})},
		{"ack_timeout", set(&df.AckTimeout, func(p path, v any) (time.Duration, bool) {
			return d.val.durationUpTo(p, v, minAckTimeout, 7*Day)
		})},
		{"max_attempts", set(&df.MaxAttempts, func(p path, v any) (int, bool) {
			n, ok := d.val.integer(p, v, 1, MaxDeferAttempts)
			return int(n), ok
		})},
		{"max_tasks", set(&df.MaxTasks, func(p path, v any) (int, bool) {
			n, ok := d.val.integer(p, v, 1, MaxDeferTasks)
			return int(n), ok
		})},
		{"keep_results", set(&df.KeepResults, func(p path, v any) (time.Duration, bool) {
			return d.val.durationUpTo(p, v, 0, MaxRetention)
		})},
	}
}

// checkStoreURL accepts redis://[:PASSWORD@]HOST:PORT/DB, the form the
// Redis store dials; anything else is a typo caught before the instance
// runs.
func checkStoreURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "redis" {
		return fmt.Errorf("want \"\" (a store in <state-dir>/deferred/) or redis://[:PASSWORD@]HOST:PORT/DB, got %q", redact(s))
	}
	host, port, err := splitHostPort(u.Host)
	if err != nil || host == "" {
		return fmt.Errorf("%q: want redis://HOST:PORT/DB", redact(s))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: invalid port %q", redact(s), port)
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return fmt.Errorf("%q: the database must be a number, got %q", redact(s), db)
		}
	}
	return nil
}

func splitHostPort(hp string) (string, string, error) {
	i := strings.LastIndex(hp, ":")
	if i < 0 {
		return "", "", fmt.Errorf("no port")
	}
	return strings.Trim(hp[:i], "[]"), hp[i+1:], nil
}

// redact hides a password in a store URL, for errors and logs.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// RedactedStore is the store URL with any password hidden.
func (df Defer) RedactedStore() string { return redact(df.Store) }
