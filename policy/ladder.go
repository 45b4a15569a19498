package policy

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ProfileIndex returns the level of the named profile.
func (p *Policy) ProfileIndex(name string) (int, bool) {
	for i, prof := range p.Profiles {
		if prof.Name == name {
			return i, true
		}
	}
	return 0, false
}

// Limit is the memory that the watermark is a fraction of, given a GPU's
// total: the quota if set (with scope=device no more than the total, since
// a quota cannot add memory), else the total.
func (p *Policy) Limit(total uint64) uint64 {
	q := p.Watch.Quota
	switch {
	case q == 0:
		return total
	case p.Watch.Scope == ScopeDevice:
		return min(q, total)
	default:
		return q
	}
}

// Fits reports whether the profile at level fits on one GPU with used of
// total bytes in use: used + needs <= Limit(total) x high, that is needs
// <= Room. A profile with no needs estimate always fits. The caller checks
// every watched GPU.
func (p *Policy) Fits(level int, used, total uint64) bool {
	needs := p.Profiles[level].Needs
	return needs == 0 || needs <= p.Room(used, total)
}

// Room is how many bytes fit under high on one GPU with used of total
// bytes in use: floor(Limit(total) x high) - used, 0 when none. It is what
// Fits judges by, and what the messages about a fit quote.
func (p *Policy) Room(used, total uint64) uint64 {
	budget := math.Floor(float64(p.Limit(total)) * p.Watermark.High)
	if float64(used) >= budget {
		return 0
	}
	return uint64(budget - float64(used))
}

// Resolve returns the checkpoint file for a state dir: the configured path
// if absolute, else joined to stateDir; <stateDir>/checkpoint by default.
func (c Checkpoint) Resolve(stateDir string) string {
	switch {
	case c.Path == "":
		return filepath.Join(stateDir, "checkpoint")
	case filepath.IsAbs(c.Path):
		return filepath.Clean(c.Path)
	default:
		return filepath.Join(stateDir, c.Path)
	}
}

// WriteLadder prints the profile ladder as a table: level, name, needs,
// whether stepping into it is live or a restart, and the env, sorted.
func (p *Policy) WriteLadder(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// The ACTIONS column appears only for a ladder that has any, so the
	// common table stays as it was.
	acts := slices.ContainsFunc(p.Profiles, func(pr Profile) bool {
		return !pr.Serving() || len(pr.Enter)+len(pr.Leave) > 0
	})
	if acts {
		fmt.Fprintln(tw, "LEVEL\tPROFILE\tNEEDS\tLIVE\tACTIONS\tENV")
	} else {
		fmt.Fprintln(tw, "LEVEL\tPROFILE\tNEEDS\tLIVE\tENV")
	}
	for i, prof := range p.Profiles {
		needs := "-"
		if prof.Needs > 0 {
			needs = FormatSize(prof.Needs)
		}
		live := "no (restart)"
		switch {
		case prof.Live:
			live = "yes"
		case !prof.Serving():
			live = "no (stop)"
		}
		if acts {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i, prof.Name, needs, live, describeActions(prof), formatEnv(prof.Env))
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i, prof.Name, needs, live, formatEnv(prof.Env))
	}
	return tw.Flush()
}

// formatEnv renders env as sorted KEY=VALUE pairs, quoting values that
// would otherwise be ambiguous.
func formatEnv(env map[string]string) string {
	if len(env) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := env[k]
		if v == "" || strings.ContainsAny(v, " \t\n\"'\\=") || !strconv.CanBackquote(v) {
			v = strconv.Quote(v)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, " ")
}

// WriteSummary prints every resolved setting, one section a line, then the
// ladder: what `gpuguard policy check` shows.
func (p *Policy) WriteSummary(w io.Writer) error {
	orNone := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	name := orNone(p.Name)
	if p.Name == "" {
		name = "(from --name or the command)"
	}
	command := "(from the command line)"
	if len(p.Command) > 0 {
		q := make([]string, len(p.Command))
		for i, a := range p.Command {
			q[i] = a
			if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
				q[i] = strconv.Quote(a)
			}
		}
		command = strings.Join(q, " ")
	}
	quota := "none"
	if p.Watch.Quota > 0 {
		quota = FormatSize(p.Watch.Quota)
	}
	recoverAfter := fmtDuration(p.Watermark.RecoverAfter)
	if p.Watermark.RecoverAfter == 0 {
		recoverAfter = "0 (no automatic step-up)"
	}
	ckpt := p.Checkpoint.Path
	if ckpt == "" {
		ckpt = "<state-dir>/checkpoint"
	}
	listen := p.Metrics.Listen
	if listen == "" {
		listen = "disabled"
	}
	builtin := len(BuiltinOOMPatterns())
	r, wm := p.Restart, p.Watermark
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	pw := p.Watch
	polling := fmtDuration(pw.Interval) + " (fixed)"
	if pw.Adaptive {
		polling = fmt.Sprintf("%s, adaptive %s..%s", fmtDuration(pw.Interval), fmtDuration(pw.MinInterval), fmtDuration(pw.MaxInterval))
	}
	lead := "0 (no predicted step-down)"
	if wm.Lead > 0 {
		lead = fmtDuration(wm.Lead)
	}
	maxAge := "0 (by count only)"
	if p.Journal.MaxAge > 0 {
		maxAge = fmtDuration(p.Journal.MaxAge)
	}
	fmt.Fprintf(tw, "name\t%s\n", name)
	fmt.Fprintf(tw, "priority\t%d\n", p.Priority)
	fmt.Fprintf(tw, "command\t%s\n", command)
	fmt.Fprintf(tw, "watch\tbackend=%s interval=%s scope=%s quota=%s settle=%s\n",
		pw.Backend, polling, pw.Scope, quota, fmtDuration(pw.Settle))
	fmt.Fprintf(tw, "watermark\tlow=%v high=%v critical=%v sustain=%s grace=%s recover_after=%s lead=%s\n",
		wm.Low, wm.High, wm.Critical, fmtDuration(wm.Sustain), fmtDuration(wm.Grace), recoverAfter, lead)
	startSecs := fmtDuration(r.StartSecs)
	if r.StartSecs == 0 {
		startSecs = "0 (off)"
	}
	fmt.Fprintf(tw, "restart\ton_crash=%v backoff=%s..%s reset_after=%s max_restarts=%d window=%s when_full=%s on_gpu_fault=%s start_secs=%s start_retries=%d\n",
		r.OnCrash, fmtDuration(r.Backoff), fmtDuration(r.BackoffMax), fmtDuration(r.ResetAfter),
		r.MaxRestarts, fmtDuration(r.Window), r.WhenFull, r.OnGPUFault, startSecs, r.StartRetries)
	fmt.Fprintf(tw, "stop\tsignal=%s timeout=%s release_timeout=%s\n",
		SignalName(r.StopSignal), fmtDuration(r.StopTimeout), fmtDuration(r.ReleaseTimeout))
	fmt.Fprintf(tw, "notify\tsignal=%s\n", SignalName(p.Notify.Signal))
	fmt.Fprintf(tw, "oom\tpatterns=%d built-in + %d own, exit_codes=%s, scan_stderr=%v\n",
		builtin, max(0, len(p.OOM.Patterns)-builtin), formatInts(p.OOM.ExitCodes), p.OOM.ScanStderr)
	fmt.Fprintf(tw, "checkpoint\tpath=%s keep=%d\n", ckpt, p.Checkpoint.Keep)
	fmt.Fprintf(tw, "metrics\t%s\n", listen)
	if p.Serve.Enabled() {
		fmt.Fprintf(tw, "serve\t%s\n", describeServe(p.Serve))
	}
	fmt.Fprintf(tw, "journal\tmax_size=%s max_files=%d max_age=%s\n", FormatSize(p.Journal.MaxSize), p.Journal.MaxFiles, maxAge)
	if err := tw.Flush(); err != nil {
		return err
	}
	plural := "s"
	if len(p.Profiles) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "\nladder (%d profile%s, first = best quality):\n", len(p.Profiles), plural)
	return p.WriteLadder(w)
}

func formatInts(ns []int) string {
	if len(ns) == 0 {
		return "none"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// GPUTotal is one watched GPU's index and total memory, for NeverFits.
type GPUTotal struct {
	Index int
	Total uint64
}

// NeverFits says why no profile can ever fit: the smallest needs exceeds
// the quota, else the total, of some GPU in gpus (a profile must fit on
// every watched GPU), or the quota alone when gpus is empty. "" when some
// profile can fit; a profile with no needs estimate always can. Waiting
// for memory that cannot exist would be for ever, so `run` exits 75 on it
// and `policy check` warns.
func (p *Policy) NeverFits(gpus []GPUTotal) string {
	smallest := -1
	for i, pr := range p.Profiles {
		if pr.Needs == 0 {
			return ""
		}
		if smallest < 0 || pr.Needs < p.Profiles[smallest].Needs {
			smallest = i
		}
	}
	if smallest < 0 {
		return ""
	}
	needs, name := p.Profiles[smallest].Needs, p.Profiles[smallest].Name
	if len(gpus) == 0 {
		if q := p.Watch.Quota; q > 0 && needs > q {
			return fmt.Sprintf("the smallest profile, %s, needs %s, more than the [watch] quota of %s", name, FormatSize(needs), FormatSize(q))
		}
		return ""
	}
	for _, g := range gpus {
		limit := p.Limit(g.Total)
		if needs <= limit {
			continue
		}
		if q := p.Watch.Quota; q > 0 && limit == q {
			return fmt.Sprintf("the smallest profile, %s, needs %s, more than the [watch] quota of %s", name, FormatSize(needs), FormatSize(q))
		}
		return fmt.Sprintf("the smallest profile, %s, needs %s, more than GPU %d holds (%s in all)", name, FormatSize(needs), g.Index, FormatSize(limit))
	}
	return ""
}
