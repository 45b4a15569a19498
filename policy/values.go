package policy

import (
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"
)

// reader reads one TOML value at a path as the type its key wants (a
// string, a size, a duration in bounds, a signal, one of some words), or
// reports to out why it cannot. It knows no schema: the decoder says
// which reader each key takes.
type reader struct {
	out *problems
}

// describe names a TOML value's type (and the value, if short) for errors.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return fmt.Sprintf("string %q", x)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return fmt.Sprintf("float %v", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case time.Time:
		return "a date/time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

func (r reader) str(p path, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		r.out.errorf(p, "must be a string, got %s", describe(v))
		return "", false
	}
	if strings.ContainsRune(s, 0) {
		r.out.errorf(p, "must not contain a NUL byte")
		return "", false
	}
	return s, true
}

func (r reader) boolean(p path, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		r.out.errorf(p, "must be true or false, got %s", describe(v))
	}
	return b, ok
}

// ratio reads a fraction of memory in (0, 1]; integers are fine ("1").
func (r reader) ratio(p path, v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	default:
		r.out.errorf(p, "must be a number between 0 and 1, got %s", describe(v))
		return 0, false
	}
	if math.IsNaN(f) || f <= 0 || f > 1 {
		r.out.errorf(p, "must be above 0 and at most 1, got %v", f)
		return 0, false
	}
	return f, true
}

func (r reader) integer(p path, v any, lo, hi int64) (int64, bool) {
	n, ok := v.(int64)
	if !ok {
		r.out.errorf(p, "must be an integer, got %s", describe(v))
		return 0, false
	}
	if n < lo || n > hi {
		r.out.errorf(p, "must be between %d and %d, got %d", lo, hi, n)
		return 0, false
	}
	return n, true
}

// duration reads a duration string (Go syntax, plus d for days), at least
// lo and at most MaxDuration.
func (r reader) duration(p path, v any, lo time.Duration) (time.Duration, bool) {
	return r.durationUpTo(p, v, lo, MaxDuration)
}

// durationUpTo is duration with another upper bound.
func (r reader) durationUpTo(p path, v any, lo, hi time.Duration) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		r.out.errorf(p, "must be a duration string such as \"10s\" or \"200ms\", got %s", describe(v))
		return 0, false
	}
	dur, err := ParseDuration(s)
	switch {
	case err != nil:
		r.out.errorf(p, "invalid duration %q: use Go syntax such as \"10s\", \"1m30s\" or \"200ms\", or days such as \"180d\"", s)
	case dur < lo && lo > 0:
		r.out.errorf(p, "must be at least %s, got %q", fmtDuration(lo), s)
	case dur < lo:
		r.out.errorf(p, "must not be negative, got %q", s)
	case dur > hi:
		r.out.errorf(p, "must be at most %s, got %q", fmtDuration(hi), s)
	default:
		return dur, true
	}
	return 0, false
}

// size reads a size string ("16GiB") or a TOML integer of bytes.
func (r reader) size(p path, v any) (uint64, bool) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			r.out.errorf(p, "must not be negative, got %d", x)
			return 0, false
		}
		return uint64(x), true
	case string:
		n, err := ParseSize(x)
		if err != nil {
			r.out.fail(p, err, err.Error())
			return 0, false
		}
		return n, true
	}
	r.out.errorf(p, "must be a size such as \"16GiB\" or a number of bytes, got %s", describe(v))
	return 0, false
}

// signal reads a signal name or number. With allowNone, "", "none" and 0
// mean no signal.
func (r reader) signal(p path, v any, allowNone bool) (syscall.Signal, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64:
		s = fmt.Sprint(x)
	default:
		r.out.errorf(p, "must be a signal name such as \"SIGTERM\", got %s", describe(v))
		return 0, false
	}
	if allowNone && (s == "" || s == "0" || strings.EqualFold(s, "none")) {
		return 0, true
	}
	sig, err := ParseSignal(s)
	if err != nil {
		r.out.fail(p, err, err.Error())
		return 0, false
	}
	if sig == syscall.SIGSTOP || allowNone && sig == syscall.SIGKILL {
		r.out.errorf(p, "%s cannot be caught; use another signal", SignalName(sig))
		return 0, false
	}
	return sig, true
}

func (r reader) enum(p path, v any, values ...string) (string, bool) {
	s, ok := r.str(p, v)
	if !ok {
		return "", false
	}
	for _, e := range values {
		if s == e {
			return s, true
		}
	}
	r.out.errorf(p, "must be one of %s, got %q", quoteList(values), s)
	return "", false
}

func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// array returns v's elements, or reports that it is not an array.
func (r reader) array(p path, v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case []map[string]any:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = m
		}
		return out, true
	}
	r.out.errorf(p, "must be an array, got %s", describe(v))
	return nil, false
}

func (r reader) stringList(p path, v any) ([]string, bool) {
	return listOf(r, p, v, r.str)
}

// listOf reads an array whose every element is read by read; one bad
// element rejects the list (and is reported at its index).
func listOf[T any](r reader, p path, v any, read func(path, any) (T, bool)) ([]T, bool) {
	elems, ok := r.array(p, v)
	if !ok {
		return nil, false
	}
	out := make([]T, 0, len(elems))
	for i, e := range elems {
		x, ok := read(p.index(i), e)
		if !ok {
			return nil, false
		}
		out = append(out, x)
	}
	return out, true
}

// fmtDuration drops the zero units time.Duration.String leaves: "10m", not
// "10m0s"; whole days print as days ("180d"), as they were likely written.
func fmtDuration(t time.Duration) string {
	if t >= Day && t%Day == 0 {
		return fmt.Sprintf("%dd", t/Day)
	}
	s := t.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
