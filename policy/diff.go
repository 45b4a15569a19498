package policy

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Diff lists the keys of policy.toml whose resolved values differ between
// a and b: dotted keys such as "watermark.high", and "profile" for any
// change to the ladder (a profile added, removed, renamed, reordered, or
// one of its keys changed). The order is the one policy.toml documents
// (top-level keys, then each section, then the ladder), so the same change
// always reads the same. A reload journals it; nothing changed is an empty,
// non-nil list.
func Diff(a, b *Policy) []string {
	changed := []string{}
	for _, k := range diffKeys {
		if !k.same(a, b) {
			changed = append(changed, k.key)
		}
	}
	return changed
}

// keyDiff says whether one key's resolved value is the same in two
// policies.
type keyDiff struct {
	key  string
	same func(a, b *Policy) bool
}

// eq compares a comparable value read from each policy.
func eq[T comparable](get func(*Policy) T) func(a, b *Policy) bool {
	return func(a, b *Policy) bool { return get(a) == get(b) }
}

// eqSlice compares a slice read from each policy (nil and empty are the
// same).
func eqSlice[T comparable](get func(*Policy) []T) func(a, b *Policy) bool {
	return func(a, b *Policy) bool { return slices.Equal(get(a), get(b)) }
}

// diffKeys holds one entry for every key of the schema (schema.go), in the
// order Diff reports them. TestDiffCoversSchema fails when a key of the
// schema has no entry here, and TestDiffCoversEveryField when a field of
// Policy can change without any entry noticing.
var diffKeys = []keyDiff{
	{"name", eq(func(p *Policy) string { return p.Name })},
	{"command", eqSlice(func(p *Policy) []string { return p.Command })},
	{"priority", eq(func(p *Policy) int { return p.Priority })},

	{"watch.backend", eq(func(p *Policy) string { return p.Watch.Backend })},
	{"watch.interval", eq(func(p *Policy) time.Duration { return p.Watch.Interval })},
	{"watch.scope", eq(func(p *Policy) string { return p.Watch.Scope })},
	{"watch.quota", eq(func(p *Policy) uint64 { return p.Watch.Quota })},
	{"watch.adaptive", eq(func(p *Policy) bool { return p.Watch.Adaptive })},
	{"watch.min_interval", eq(func(p *Policy) time.Duration { return p.Watch.MinInterval })},
	{"watch.max_interval", eq(func(p *Policy) time.Duration { return p.Watch.MaxInterval })},
	{"watch.settle", eq(func(p *Policy) time.Duration { return p.Watch.Settle })},
	{"watch.on_gpu_lost", eq(func(p *Policy) string { return p.Watch.OnGPULost })},
	{"watch.lost_after", eq(func(p *Policy) time.Duration { return p.Watch.LostAfter })},

	{"watermark.high", eq(func(p *Policy) float64 { return p.Watermark.High })},
	{"watermark.critical", eq(func(p *Policy) float64 { return p.Watermark.Critical })},
	{"watermark.low", eq(func(p *Policy) float64 { return p.Watermark.Low })},
	{"watermark.sustain", eq(func(p *Policy) time.Duration { return p.Watermark.Sustain })},
	{"watermark.grace", eq(func(p *Policy) time.Duration { return p.Watermark.Grace })},
	{"watermark.recover_after", eq(func(p *Policy) time.Duration { return p.Watermark.RecoverAfter })},
	{"watermark.lead", eq(func(p *Policy) time.Duration { return p.Watermark.Lead })},

	{"restart.on_crash", eq(func(p *Policy) bool { return p.Restart.OnCrash })},
	{"restart.backoff", eq(func(p *Policy) time.Duration { return p.Restart.Backoff })},
	{"restart.backoff_max", eq(func(p *Policy) time.Duration { return p.Restart.BackoffMax })},
	{"restart.reset_after", eq(func(p *Policy) time.Duration { return p.Restart.ResetAfter })},
	{"restart.max_restarts", eq(func(p *Policy) int { return p.Restart.MaxRestarts })},
	{"restart.window", eq(func(p *Policy) time.Duration { return p.Restart.Window })},
	{"restart.start_secs", eq(func(p *Policy) time.Duration { return p.Restart.StartSecs })},
	{"restart.start_retries", eq(func(p *Policy) int { return p.Restart.StartRetries })},
	{"restart.stop_signal", eq(func(p *Policy) syscall.Signal { return p.Restart.StopSignal })},
	{"restart.stop_timeout", eq(func(p *Policy) time.Duration { return p.Restart.StopTimeout })},
	{"restart.release_timeout", eq(func(p *Policy) time.Duration { return p.Restart.ReleaseTimeout })},
	{"restart.when_full", eq(func(p *Policy) string { return p.Restart.WhenFull })},
	{"restart.on_gpu_fault", eq(func(p *Policy) string { return p.Restart.OnGPUFault })},

	{"notify.signal", eq(func(p *Policy) syscall.Signal { return p.Notify.Signal })},

	{"oom.patterns", func(a, b *Policy) bool { return slices.EqualFunc(a.OOM.Patterns, b.OOM.Patterns, sameRegexp) }},
	{"oom.exit_codes", eqSlice(func(p *Policy) []int { return p.OOM.ExitCodes })},
	{"oom.scan_stderr", eq(func(p *Policy) bool { return p.OOM.ScanStderr })},

	{"checkpoint.path", eq(func(p *Policy) string { return p.Checkpoint.Path })},
	{"checkpoint.keep", eq(func(p *Policy) int { return p.Checkpoint.Keep })},

	{"metrics.listen", eq(func(p *Policy) string { return p.Metrics.Listen })},

	{"journal.max_size", eq(func(p *Policy) uint64 { return p.Journal.MaxSize })},
	{"journal.max_files", eq(func(p *Policy) int { return p.Journal.MaxFiles })},
	{"journal.max_age", eq(func(p *Policy) time.Duration { return p.Journal.MaxAge })},

	{"serve.listen", eq(func(p *Policy) string { return p.Serve.Listen })},
	{"serve.upstream", eq(func(p *Policy) string { return p.Serve.Upstream })},
	{"serve.health", eq(func(p *Policy) string { return p.Serve.Health })},
	{"serve.hold", eq(func(p *Policy) time.Duration { return p.Serve.Hold })},
	{"serve.max_held", eq(func(p *Policy) int { return p.Serve.MaxHeld })},
	{"serve.retry", eq(func(p *Policy) bool { return p.Serve.Retry })},
	{"serve.fallback", eq(func(p *Policy) string { return p.Serve.Fallback })},
	{"serve.priority", eq(func(p *Policy) string { return p.Serve.Priority })},
	{"serve.wake", eq(func(p *Policy) bool { return p.Serve.Wake })},
	{"serve.idle", eq(func(p *Policy) time.Duration { return p.Serve.Idle })},
	{"serve.make_room", eq(func(p *Policy) bool { return p.Serve.MakeRoom })},
	{"serve.keep_awake", eq(func(p *Policy) time.Duration { return p.Serve.KeepAwake })},
	{"serve.models", eqSlice(func(p *Policy) []string { return p.Serve.Models })},
	{"defer.store", eq(func(p *Policy) string { return p.Defer.Store })},
	{"defer.window", eq(func(p *Policy) Window { return p.Defer.Window })},
	{"defer.ack_timeout", eq(func(p *Policy) time.Duration { return p.Defer.AckTimeout })},
	{"defer.max_attempts", eq(func(p *Policy) int { return p.Defer.MaxAttempts })},
	{"defer.max_tasks", eq(func(p *Policy) int { return p.Defer.MaxTasks })},
	{"defer.keep_results", eq(func(p *Policy) time.Duration { return p.Defer.KeepResults })},

	{"profile", func(a, b *Policy) bool { return slices.EqualFunc(a.Profiles, b.Profiles, sameProfile) }},
}

func sameRegexp(a, b *regexp.Regexp) bool { return a.String() == b.String() }

// sameProfile compares two rungs; an env left out and an empty one are
// the same.
func sameProfile(a, b Profile) bool {
	return a.Name == b.Name && a.Needs == b.Needs && a.Live == b.Live && maps.Equal(a.Env, b.Env) &&
		a.NotServing == b.NotServing && sameActions(a.Enter, b.Enter) && sameActions(a.Leave, b.Leave)
}

// Locate returns the line (1-based) where the dotted key ("watch.backend")
// is written in src, a policy file's text, or that of its nearest written
// parent ([watch]); 0 when neither is. It lets a caller that finds a
// problem beyond Parse's rules (a reload that would rename the instance)
// cite the line as Parse's own errors do.
func Locate(src []byte, key string) int {
	return indexLines(src).line(strings.Split(key, "."))
}
