package policy

import (
	"fmt"
	"net"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/internal/paths"
)

// minInterval keeps a mistyped interval from spinning the probe; minWindow
// keeps max_restarts meaningful; minLostAfter keeps one failed reading from
// stopping a service.
const (
	minInterval  = time.Millisecond
	minWindow    = time.Second
	minLostAfter = time.Second
	// minSettle keeps "the child's memory has stopped growing" from being
	// judged on one or two samples.
	minSettle = 100 * time.Millisecond
	// minJournalSize keeps a journal file able to hold a few events.
	minJournalSize = 64 << 10
)

// sectionOrder lists the [section] tables in the order policy.toml documents
// them.
var sectionOrder = [...]string{"watch", "watermark", "restart", "notify", "oom", "checkpoint", "metrics", "journal", "serve", "defer"}

// policy decodes the whole document into pol, which holds the defaults.
func (d *decoder) policy(pol *Policy, raw map[string]any) {
	secs := d.sectionFields(pol)
	names := map[string][]string{"profile": fieldNames(d.profileFields(&Profile{}))}
	for s, fs := range secs {
		names[s] = fieldNames(fs)
	}
	top := d.topFields(pol, secs, names)
	names[""] = fieldNames(top)
	d.table(nil, raw, top, names)
}

// topFields are the document's own keys: the top-level values and the
// ladder, then one table per section (secs) in sectionOrder. names lists
// every table's keys, for suggestions.
func (d *decoder) topFields(pol *Policy, secs map[string][]field, names map[string][]string) []field {
	top := []field{
		{"name", func(p path, v any) {
			if s, ok := d.val.str(p, v); ok {
				// The same rule as --name: the name becomes file names.
				if err := paths.ValidName(s); err != nil {
					d.out.fail(p, err, err.Error())
					return
				}
				pol.Name = s
			}
		}},
		{"command", func(p path, v any) {
			args, ok := d.val.stringList(p, v)
			switch {
			case !ok:
			case len(args) == 0:
				d.out.errorf(p, "must not be empty (leave it out to take the command from the command line)")
			case args[0] == "":
				d.out.errorf(p.index(0), "the program must not be empty")
			default:
				pol.Command = args
			}
		}},
		{"priority", set(&pol.Priority, func(p path, v any) (int, bool) {
			n, ok := d.val.integer(p, v, -MaxPriority, MaxPriority)
			return int(n), ok
		})},
		{"profile", func(p path, v any) { d.profiles(pol, p, v, names) }},
	}
	for _, s := range sectionOrder {
		top = append(top, field{s, func(p path, v any) { d.table(p, v, secs[s], names) }})
	}
	return top
}

func fieldNames(fs []field) []string {
	n := make([]string, len(fs))
	for i, f := range fs {
		n[i] = f.name
	}
	return n
}

// set returns a decode function that stores a successfully read value.
func set[T any](dst *T, read func(path, any) (T, bool)) func(path, any) {
	return func(p path, v any) {
		if x, ok := read(p, v); ok {
			*dst = x
		}
	}
}

func (d *decoder) sectionFields(pol *Policy) map[string][]field {
	w, wm, r := &pol.Watch, &pol.Watermark, &pol.Restart
	nonNeg := func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, 0) }
	return map[string][]field{
		"watch": {
			{"backend", set(&w.Backend, func(p path, v any) (string, bool) {
				return d.val.enum(p, v, d.opts.backends...)
			})},
			{"interval", set(&w.Interval, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, minInterval) })},
			{"scope", set(&w.Scope, func(p path, v any) (string, bool) { return d.val.enum(p, v, ScopeDevice, ScopeProcess) })},
			{"quota", set(&w.Quota, func(p path, v any) (uint64, bool) {
				if s, ok := v.(string); ok && strings.TrimSpace(s) == "" {
					return 0, true
				}
				return d.val.size(p, v)
			})},
			{"adaptive", set(&w.Adaptive, d.val.boolean)},
			{"min_interval", set(&w.MinInterval, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, minInterval) })},
			{"max_interval", set(&w.MaxInterval, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, minInterval) })},
			{"settle", set(&w.Settle, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, minSettle) })},
			{"on_gpu_lost", set(&w.OnGPULost, func(p path, v any) (string, bool) {
				return d.val.enum(p, v, OnGPULostKeep, OnGPULostStop)
			})},
			{"lost_after", set(&w.LostAfter, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, minLostAfter) })},
		},
		"watermark": {
			{"high", set(&wm.High, d.val.ratio)},
			{"critical", set(&wm.Critical, d.val.ratio)},
			{"low", set(&wm.Low, d.val.ratio)},
			{"sustain", set(&wm.Sustain, nonNeg)},
			{"grace", set(&wm.Grace, nonNeg)},
			{"recover_after", set(&wm.RecoverAfter, nonNeg)},
			{"lead", set(&wm.Lead, nonNeg)},
		},
		"restart": {
			{"on_crash", set(&r.OnCrash, d.val.boolean)},
			{"backoff", set(&r.Backoff, nonNeg)},
			{"backoff_max", set(&r.BackoffMax, nonNeg)},
			{"reset_after", set(&r.ResetAfter, nonNeg)},
			{"max_restarts", set(&r.MaxRestarts, func(p path, v any) (int, bool) {
				n, ok := d.val.integer(p, v, 0, MaxRestarts)
				return int(n), ok
			})},
			{"window", set(&r.Window, func(p path, v any) (time.Duration, bool) { return d.val.duration(p, v, minWindow) })},
			{"start_secs", set(&r.StartSecs, nonNeg)},
			{"start_retries", set(&r.StartRetries, func(p path, v any) (int, bool) {
				n, ok := d.val.integer(p, v, 1, MaxRestarts)
				return int(n), ok
			})},
			{"stop_signal", set(&r.StopSignal, func(p path, v any) (syscall.Signal, bool) { return d.val.signal(p, v, false) })},
			{"stop_timeout", set(&r.StopTimeout, nonNeg)},
			{"release_timeout", set(&r.ReleaseTimeout, nonNeg)},
			{"when_full", set(&r.WhenFull, func(p path, v any) (string, bool) {
				return d.val.enum(p, v, WhenFullWait, WhenFullLowest, WhenFullExit)
			})},
			{"on_gpu_fault", set(&r.OnGPUFault, func(p path, v any) (string, bool) {
				return d.val.enum(p, v, OnGPUFaultStop, OnGPUFaultRestart)
			})},
		},
		"notify": {
			{"signal", set(&pol.Notify.Signal, func(p path, v any) (syscall.Signal, bool) { return d.val.signal(p, v, true) })},
		},
		"oom": {
			{"patterns", func(p path, v any) { d.oomPatterns(&pol.OOM, p, v) }},
			{"exit_codes", set(&pol.OOM.ExitCodes, d.val.exitCodes)},
			{"scan_stderr", set(&pol.OOM.ScanStderr, d.val.boolean)},
		},
		"checkpoint": {
			{"path", set(&pol.Checkpoint.Path, d.val.str)},
			{"keep", set(&pol.Checkpoint.Keep, func(p path, v any) (int, bool) {
				n, ok := d.val.integer(p, v, 0, MaxKeep)
				return int(n), ok
			})},
		},
		"metrics": {
			{"listen", set(&pol.Metrics.Listen, d.val.listenAddr)},
		},
		"defer": d.deferFields(&pol.Defer),
		"journal": {
			{"max_size", set(&pol.Journal.MaxSize, func(p path, v any) (uint64, bool) {
				n, ok := d.val.size(p, v)
				if ok && n < minJournalSize {
					d.out.errorf(p, "must be at least %s, got %s", FormatSize(minJournalSize), FormatSize(n))
					return 0, false
				}
				return n, ok
			})},
			{"max_files", set(&pol.Journal.MaxFiles, func(p path, v any) (int, bool) {
				n, ok := d.val.integer(p, v, 0, MaxJournal)
				return int(n), ok
			})},
			{"max_age", set(&pol.Journal.MaxAge, func(p path, v any) (time.Duration, bool) {
				return d.val.durationUpTo(p, v, 0, MaxRetention)
			})},
		},
		"serve": d.serveFields(&pol.Serve),
	}
}

func (d *decoder) oomPatterns(o *OOM, p path, v any) {
	pats, ok := d.val.stringList(p, v)
	if !ok {
		return
	}
	if len(pats) > MaxOOMPatterns {
		d.out.errorf(p, "%d patterns; at most %d are allowed", len(pats), MaxOOMPatterns)
		return
	}
	budget := maxOOMInsts
	for i, s := range pats {
		n, err := regexpSize(s)
		if err == nil && n > budget {
			d.out.errorf(p.index(i), "pattern %q is too complex: the patterns may compile to %d instructions together, this one alone to %d (large {n,m} repeats multiply)", s, maxOOMInsts, n)
			continue
		}
		budget -= n
		var re *regexp.Regexp
		if err == nil {
			re, err = regexp.Compile(s)
		}
		switch {
		case err != nil:
			d.out.fail(p.index(i), err, fmt.Sprintf("invalid RE2 pattern %q: %v", s, err))
		case re.MatchString(""):
			// It would match every stderr, so every crash would count as OOM.
			d.out.errorf(p.index(i), "pattern %q matches the empty string, so every exit would count as out of memory", s)
		default:
			o.Patterns = append(o.Patterns, re)
		}
	}
}

// maxOOMInsts bounds the compiled size of the policy's OOM patterns
// together. The built-in ones take a few hundred; a pattern such as
// "x{1,1000}" repeated takes 2,000 per repeat, seconds to compile and to
// run over a child's stderr tail at every exit.
const maxOOMInsts = 10_000

// regexpSize estimates the number of instructions s compiles to: its
// syntax tree's nodes and literal runes, each times the repeats around it.
// Only the syntax is parsed, so a huge repeat is measured without building
// the matcher.
func regexpSize(s string) (int, error) {
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return 0, err
	}
	n := 0
	var walk func(*syntax.Regexp, int)
	walk = func(r *syntax.Regexp, times int) {
		switch r.Op {
		case syntax.OpRepeat:
			if r.Max > 0 {
				times *= r.Max
			} else {
				times *= max(r.Min, 1)
			}
		}
		n += times * max(len(r.Rune), 1)
		for _, sub := range r.Sub {
			if n > maxOOMInsts {
				return
			}
			walk(sub, times)
		}
	}
	walk(re, 1)
	return n, nil
}

func (r reader) exitCodes(p path, v any) ([]int, bool) {
	return listOf(r, p, v, func(p path, e any) (int, bool) {
		// 0 is success and ends gpuguard; above 255 no process can exit.
		n, ok := r.integer(p, e, 1, 255)
		return int(n), ok
	})
}

func (r reader) listenAddr(p path, v any) (string, bool) {
	s, ok := r.str(p, v)
	if !ok || s == "" {
		return s, ok
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		r.out.errorf(p, "must be HOST:PORT such as \"127.0.0.1:9464\" (empty disables it), got %q", s)
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		r.out.errorf(p, "invalid port %q in %q", port, s)
		return "", false
	}
	return s, true
}
