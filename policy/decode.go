package policy

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The file is decoded into a generic tree and checked by hand against the
// schema below, rather than decoded into tagged structs, so that every
// problem (unknown key, wrong type, bad value) is reported with its line
// in one pass; struct decoding stops at the first type mismatch.

// decoder collects problems while filling a Policy.
type decoder struct {
	file  string
	src   []byte
	lines *lineIndex      // built at the first error
	errs  ErrorList       //
	bad   map[string]bool // paths whose values were rejected
	opts  parseOptions
}

func (d *decoder) fail(p path, cause error, msg string) {
	if d.lines == nil {
		d.lines = indexLines(d.src)
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: d.lines.line(p), Key: p.String(), Msg: msg, Err: cause})
	d.bad[p.String()] = true
}

func (d *decoder) errorf(p path, format string, args ...any) {
	d.fail(p, nil, fmt.Sprintf(format, args...))
}

// field is one known key of a table and how to decode its value.
type field struct {
	name   string
	decode func(p path, v any)
}

// table decodes the table v at p with the given fields. others lists every
// table's key names, to suggest where a misplaced key belongs.
func (d *decoder) table(p path, v any, fields []field, others map[string][]string) {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(p, "must be a table, got %s", describe(v))
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		found := false
		for _, f := range fields {
			if f.name == k {
				f.decode(p.key(k), m[k])
				found = true
				break
			}
		}
		if !found {
			d.errorf(p.key(k), "unknown key%s", suggest(k, fields, others))
		}
	}
}

// suggest offers a near-miss among the table's own keys, or names the
// table where the key belongs.
func suggest(k string, fields []field, others map[string][]string) string {
	for _, f := range fields {
		if nearMiss(k, f.name) {
			return fmt.Sprintf(" (did you mean %q?)", f.name)
		}
	}
	tables := make([]string, 0, len(others))
	for t := range others {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, exact := range []bool{true, false} {
		for _, t := range tables {
			for _, n := range others[t] {
				if exact && n != k || !exact && !nearMiss(k, n) || sameFields(fields, others[t]) {
					continue
				}
				switch t {
				case "":
					return fmt.Sprintf(" (%q belongs at the top, before any [section])", n)
				case "profile":
					return fmt.Sprintf(" (%q belongs in a [[profile]] section)", n)
				}
				return fmt.Sprintf(" (did you mean %s.%s? it belongs in the [%s] section)", t, n, t)
			}
		}
	}
	return ""
}

// sameFields reports whether names are those of fields: the table being
// decoded, which the caller has already searched.
func sameFields(fields []field, names []string) bool {
	if len(fields) != len(names) {
		return false
	}
	for i, f := range fields {
		if f.name != names[i] {
			return false
		}
	}
	return true
}

// nearMiss reports a likely typo: an edit distance of at most 2, or of 1 for
// short keys.
func nearMiss(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	limit := 2
	if len(b) <= 4 {
		limit = 1
	}
	if a == b {
		return true
	}
	if abs(len(a)-len(b)) > limit || len(a) > 64 {
		return false
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)] <= limit
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
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

func (d *decoder) str(p path, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		d.errorf(p, "must be a string, got %s", describe(v))
		return "", false
	}
	if strings.ContainsRune(s, 0) {
		d.errorf(p, "must not contain a NUL byte")
		return "", false
	}
	return s, true
}

func (d *decoder) boolean(p path, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		d.errorf(p, "must be true or false, got %s", describe(v))
	}
	return b, ok
}

// ratio reads a fraction of memory in (0, 1]; integers are fine ("1").
func (d *decoder) ratio(p path, v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	default:
		d.errorf(p, "must be a number between 0 and 1, got %s", describe(v))
		return 0, false
	}
	if math.IsNaN(f) || f <= 0 || f > 1 {
		d.errorf(p, "must be above 0 and at most 1, got %v", f)
		return 0, false
	}
	return f, true
}

func (d *decoder) integer(p path, v any, lo, hi int64) (int64, bool) {
	n, ok := v.(int64)
	if !ok {
		d.errorf(p, "must be an integer, got %s", describe(v))
		return 0, false
	}
	if n < lo || n > hi {
		d.errorf(p, "must be between %d and %d, got %d", lo, hi, n)
		return 0, false
	}
	return n, true
}

// duration reads a duration string (Go syntax, plus d for days), at least
// lo and at most MaxDuration.
func (d *decoder) duration(p path, v any, lo time.Duration) (time.Duration, bool) {
	return d.durationUpTo(p, v, lo, MaxDuration)
}

// durationUpTo is duration with another upper bound.
func (d *decoder) durationUpTo(p path, v any, lo, hi time.Duration) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		d.errorf(p, "must be a duration string such as \"10s\" or \"200ms\", got %s", describe(v))
		return 0, false
	}
	dur, err := ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(p, "invalid duration %q: use Go syntax such as \"10s\", \"1m30s\" or \"200ms\", or days such as \"180d\"", s)
	case dur < lo && lo > 0:
		d.errorf(p, "must be at least %s, got %q", fmtDuration(lo), s)
	case dur < lo:
		d.errorf(p, "must not be negative, got %q", s)
	case dur > hi:
		d.errorf(p, "must be at most %s, got %q", fmtDuration(hi), s)
	default:
		return dur, true
	}
	return 0, false
}

// size reads a size string ("16GiB") or a TOML integer of bytes.
func (d *decoder) size(p path, v any) (uint64, bool) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			d.errorf(p, "must not be negative, got %d", x)
			return 0, false
		}
		return uint64(x), true
	case string:
		n, err := ParseSize(x)
		if err != nil {
			d.fail(p, err, err.Error())
			return 0, false
		}
		return n, true
	}
	d.errorf(p, "must be a size such as \"16GiB\" or a number of bytes, got %s", describe(v))
	return 0, false
}

// signal reads a signal name or number. With allowNone, "", "none" and 0
// mean no signal.
func (d *decoder) signal(p path, v any, allowNone bool) (syscall.Signal, bool) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64:
		s = fmt.Sprint(x)
	default:
		d.errorf(p, "must be a signal name such as \"SIGTERM\", got %s", describe(v))
		return 0, false
	}
	if allowNone && (s == "" || s == "0" || strings.EqualFold(s, "none")) {
		return 0, true
	}
	sig, err := ParseSignal(s)
	if err != nil {
		d.fail(p, err, err.Error())
		return 0, false
	}
	if sig == syscall.SIGSTOP || allowNone && sig == syscall.SIGKILL {
		d.errorf(p, "%s cannot be caught; use another signal", SignalName(sig))
		return 0, false
	}
	return sig, true
}

func (d *decoder) enum(p path, v any, values ...string) (string, bool) {
	s, ok := d.str(p, v)
	if !ok {
		return "", false
	}
	for _, e := range values {
		if s == e {
			return s, true
		}
	}
	d.errorf(p, "must be one of %s, got %q", quoteList(values), s)
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
func (d *decoder) array(p path, v any) ([]any, bool) {
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
	d.errorf(p, "must be an array, got %s", describe(v))
	return nil, false
}

func (d *decoder) stringList(p path, v any) ([]string, bool) {
	elems, ok := d.array(p, v)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		s, ok := d.str(p.index(i), e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
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
