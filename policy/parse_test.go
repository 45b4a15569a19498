package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	p := Default()
	want := &Policy{
		Watch: Watch{Backend: "auto", Interval: 200 * time.Millisecond, Scope: "device",
			Adaptive: true, MinInterval: 20 * time.Millisecond, MaxInterval: time.Second, Settle: 5 * time.Second,
			OnGPULost: "keep", LostAfter: 30 * time.Second},
		Watermark: Watermark{High: 0.90, Critical: 0.97, Low: 0.70,
			Sustain: time.Second, Grace: 10 * time.Second},
		Restart: Restart{OnCrash: true, Backoff: time.Second, BackoffMax: 60 * time.Second,
			ResetAfter: 10 * time.Minute, MaxRestarts: 10, Window: 10 * time.Minute,
			StartSecs: 5 * time.Second, StartRetries: 3, StopSignal: syscall.SIGTERM, StopTimeout: 30 * time.Second,
			ReleaseTimeout: 30 * time.Second, WhenFull: "wait", OnGPUFault: "stop"},
		Notify:     Notify{Signal: syscall.SIGUSR1},
		OOM:        OOM{Patterns: p.OOM.Patterns, ScanStderr: true},
		Checkpoint: Checkpoint{Keep: 3},
		Journal:    Journal{MaxSize: 16 << 20, MaxFiles: 4},
		Serve: Serve{Health: "/health", Hold: 120 * time.Second, MaxHeld: 1000, Retry: true,
			Priority: "P0", Wake: true, MakeRoom: true, KeepAwake: 60 * time.Second},
		Defer: Defer{AckTimeout: 10 * time.Minute, MaxAttempts: 5, MaxTasks: 100000,
			KeepResults: 24 * time.Hour},
		Profiles: []Profile{{Name: "default", Env: map[string]string{}}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("Default() =\n%+v\nwant\n%+v", p, want)
	}
	if len(p.OOM.Patterns) != len(BuiltinOOMPatterns()) {
		t.Errorf("%d OOM patterns, want the built-ins", len(p.OOM.Patterns))
	}
	// Callers may modify what they get.
	p.Profiles[0].Env["X"] = "1"
	if len(Default().Profiles[0].Env) != 0 {
		t.Error("Default() shares state between calls")
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "[watch]\n[oom]\n"} {
		p, err := Parse([]byte(src), "e.toml")
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		want := Default()
		want.Source = "e.toml"
		if !reflect.DeepEqual(p, want) {
			t.Errorf("Parse(%q) =\n%+v\nwant the defaults", src, p)
		}
	}
}

const full = `name = "llama"
priority = -20
command = ["python3", "serve.py", "--batch", "${MAX_BATCH}"]
[watch]
backend  = "sim"
interval = "50ms"
scope    = "process"
quota    = "20GiB"
adaptive = false
min_interval = "10ms"
max_interval = "2s"
settle = "8s"
on_gpu_lost = "stop"
lost_after  = "10s"
[watermark]
high          = 0.85
critical      = 0.95
low           = 0.5
sustain       = "2s"
grace         = "5s"
recover_after = "1m"
lead          = "30s"
[restart]
on_crash        = false
backoff         = "500ms"
backoff_max     = "30s"
reset_after     = "5m"
max_restarts    = 0
window          = "1h"
stop_signal     = "INT"
stop_timeout    = "10s"
release_timeout = "0s"
when_full       = "exit"
on_gpu_fault    = "restart"
start_secs      = "0s"
start_retries   = 2
[notify]
signal = "none"
[oom]
patterns    = ["MyOOM"]
exit_codes  = [42]
scan_stderr = false
[checkpoint]
path = "/data/ckpt.pt"
keep = 0
[metrics]
listen = "127.0.0.1:9464"
[journal]
max_size  = "1MiB"
max_files = 10
max_age   = "180d"
[serve]
listen   = "127.0.0.1:8000"
upstream = "http://127.0.0.1:8001/"
health   = "/"
hold     = "30s"
max_held = 10
retry    = false
fallback = "http://127.0.0.1:8002"
priority = "P1"
wake     = false
idle     = "10m"
make_room = false
keep_awake = "5m"
[defer]
store        = "redis://:secret@10.0.0.5:6379/2"
window       = "22:30-06:00"
ack_timeout  = "90s"
max_attempts = 3
max_tasks    = 500
keep_results = "1h"

[[profile]]
name  = "fp16"
needs = "40GiB"
env   = { DTYPE = "float16", MAX_BATCH = "32" }
[[profile]]
name = "int8"
needs = 21474836480
live = true
[profile.env]
DTYPE = "int8"
MAX_BATCH = 16
`

func TestParseFull(t *testing.T) {
	p, err := Parse([]byte(full), "full.toml", contractBackends())
	if err != nil {
		t.Fatal(err)
	}
	got := *p
	got.OOM.Patterns = nil
	want := Policy{
		Source:   "full.toml",
		Name:     "llama",
		Priority: -20,
		Command:  []string{"python3", "serve.py", "--batch", "${MAX_BATCH}"},
		Watch: Watch{Backend: "sim", Interval: 50 * time.Millisecond, Scope: "process", Quota: 20 << 30,
			Adaptive: false, MinInterval: 10 * time.Millisecond, MaxInterval: 2 * time.Second, Settle: 8 * time.Second,
			OnGPULost: "stop", LostAfter: 10 * time.Second},
		Watermark: Watermark{High: 0.85, Critical: 0.95, Low: 0.5, Sustain: 2 * time.Second,
			Grace: 5 * time.Second, RecoverAfter: time.Minute, Lead: 30 * time.Second},
		Restart: Restart{OnCrash: false, Backoff: 500 * time.Millisecond, BackoffMax: 30 * time.Second,
			ResetAfter: 5 * time.Minute, MaxRestarts: 0, Window: time.Hour, StopSignal: syscall.SIGINT,
			StopTimeout: 10 * time.Second, ReleaseTimeout: 0, WhenFull: "exit", OnGPUFault: "restart",
			StartSecs: 0, StartRetries: 2},
		Notify:     Notify{Signal: 0},
		OOM:        OOM{ExitCodes: []int{42}, ScanStderr: false},
		Checkpoint: Checkpoint{Path: "/data/ckpt.pt", Keep: 0},
		Metrics:    Metrics{Listen: "127.0.0.1:9464"},
		Journal:    Journal{MaxSize: 1 << 20, MaxFiles: 10, MaxAge: 180 * Day},
		Serve: Serve{Listen: "127.0.0.1:8000", Upstream: "http://127.0.0.1:8001", Health: "/",
			Hold: 30 * time.Second, MaxHeld: 10, Retry: false, Fallback: "http://127.0.0.1:8002",
			Priority: "P1", Wake: false, Idle: 10 * time.Minute, MakeRoom: false, KeepAwake: 5 * time.Minute},
		Defer: Defer{Store: "redis://:secret@10.0.0.5:6379/2", Window: Window{Start: 22*60 + 30, End: 6 * 60, Set: true},
			AckTimeout: 90 * time.Second, MaxAttempts: 3, MaxTasks: 500, KeepResults: time.Hour},
		Profiles: []Profile{
			{Name: "fp16", Needs: 40 << 30, Env: map[string]string{"DTYPE": "float16", "MAX_BATCH": "32"}},
			{Name: "int8", Needs: 20 << 30, Live: true, Env: map[string]string{"DTYPE": "int8", "MAX_BATCH": "16"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	if n := len(p.OOM.Patterns); n != len(BuiltinOOMPatterns())+1 || p.OOM.Patterns[n-1].String() != "MyOOM" {
		t.Errorf("patterns: %v", p.OOM.Patterns)
	}
}

func TestParseInlineProfiles(t *testing.T) {
	p, err := Parse([]byte(`profile = [
  { name = "a", env = { X = "1" } },
  { name = "b", live = true },
]`), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Profiles) != 2 || p.Profiles[1].Name != "b" || !p.Profiles[1].Live || p.Profiles[0].Env["X"] != "1" {
		t.Fatalf("profiles: %+v", p.Profiles)
	}
	if p.Profiles[1].Env == nil {
		t.Error("a profile without env must have an empty, non-nil Env")
	}
}

// TestParseAccepts covers values that are valid though not obvious.
func TestParseAccepts(t *testing.T) {
	for _, src := range []string{
		"[watermark]\ncritical = 1",
		"[watermark]\nhigh = 0.5\nlow = 0.1\ncritical = 0.6",
		"[watch]\nquota = \"\"",
		"[watch]\nquota = 1073741824",
		"[watch]\nquota = \"1.5 GB\"",
		"[restart]\nstop_signal = 15",
		"[restart]\nstop_signal = \"SIGKILL\"",
		"[restart]\nbackoff = \"0s\"\nbackoff_max = \"0s\"",
		"[restart]\nbackoff = \"2m\"\nbackoff_max = \"5m\"",
		"[notify]\nsignal = \"\"",
		"[notify]\nsignal = 0",
		"[notify]\nsignal = \"HUP\"",
		"[metrics]\nlisten = \":9464\"",
		"[metrics]\nlisten = \"[::1]:9464\"",
		"[[profile]]\nname = \"a\"\nenv = { A = 1, B = 1.5, C = true, D = \"\" }",
		"[[profile]]\nname = \"a\"\n[profile.env]\n_X1 = \"y\"",
		"[[profile]]\nname = \"a\"\nenv.A = \"1\"",
		"[[profile]]\nname = \"v1.2_x-y\"",
		"command = [\"serve\", \"$$HOME\", \"$X\", \"${GPUGUARD_NAME}\"]",
		"[watch]\ninterval = \"720h\"",
	} {
		if _, err := Parse([]byte(src), "t.toml"); err != nil {
			t.Errorf("Parse(%q): %v", src, err)
		}
	}
}

// TestParseErrors checks each rule: the key, the line and the message.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		key  string
		msg  string
	}{
		// syntax
		{"syntax", "[watch]\nbackend = \n", 2, "", "invalid TOML"},
		{"duplicate key", "[watch]\nbackend = \"sim\"\nbackend = \"sim\"\n", 3, "", "already been defined"},
		{"unclosed table", "[watch\n", 1, "", "invalid TOML"},
		// unknown keys
		{"unknown top", "\n\nfoo = 1", 3, "foo", "unknown key"},
		{"unknown section", "[watchh]\nbackend = \"sim\"", 1, "watchh", `did you mean "watch"`},
		{"typo", "[watch]\nintervall = \"1s\"", 2, "watch.intervall", `did you mean "interval"`},
		{"transposed", "[watermark]\nhihg = 0.8", 2, "watermark.hihg", `did you mean "high"`},
		{"transposed, long", "[restart]\nstart_retires = 2", 2, "restart.start_retires", `did you mean "start_retries"`},
		{"start_retries 0", "[restart]\nstart_retries = 0", 2, "restart.start_retries", "must be between 1 and"},
		{"start_secs negative", "[restart]\nstart_secs = \"-1s\"", 2, "restart.start_secs", "must not be negative"},
		{"misplaced", "interval = \"1s\"", 1, "interval", "[watch] section"},
		{"misplaced in profile", "[[profile]]\nname = \"a\"\nhigh = 0.5", 3, "profile[0].high", "[watermark]"},
		{"unknown profile key", "[[profile]]\nname = \"a\"\n\nneed = \"1GiB\"", 4, "profile[0].need", `did you mean "needs"`},
		{"name in section", "[watch]\nname = \"x\"", 2, "watch.name", "belongs at the top"},
		// types
		{"section not table", "watch = 5", 1, "watch", "must be a table"},
		{"backend type", "[watch]\nbackend = 1", 2, "watch.backend", "must be a string, got integer 1"},
		{"bool type", "[restart]\non_crash = \"yes\"", 2, "restart.on_crash", "must be true or false"},
		{"duration type", "[watch]\ninterval = 200", 2, "watch.interval", "duration string"},
		{"ratio type", "[watermark]\nhigh = \"90%\"", 2, "watermark.high", "must be a number"},
		{"int type", "[restart]\nmax_restarts = 1.5", 2, "restart.max_restarts", "must be an integer"},
		{"command type", "command = \"serve.py\"", 1, "command", "must be an array"},
		{"command elem", "command = [\"a\",\n  1]", 2, "command[1]", "must be a string"},
		{"env type", "[[profile]]\nname = \"a\"\nenv = [\"A=1\"]", 3, "profile[0].env", "must be a table"},
		{"env value type", "[[profile]]\nname = \"a\"\nenv = { A = [1] }", 3, "profile[0].env.A", "string, number or boolean"},
		{"profile not array", "[profile]\nname = \"a\"", 1, "profile", "[[profile]]"},
		{"profile elem", "profile = [1]", 1, "profile[0]", "must be a table"},
		{"needs type", "[[profile]]\nname = \"a\"\nneeds = true", 3, "profile[0].needs", "must be a size"},
		{"date", "[watch]\ninterval = 2024-01-01", 2, "watch.interval", "date/time"},
		// enums
		{"backend enum", "[watch]\nbackend = \"cuda\"", 2, "watch.backend", `"auto", "nvml", "drm", "sim", "npu-smi"`},
		{"scope enum", "[watch]\nscope = \"host\"", 2, "watch.scope", "must be one of"},
		{"when_full enum", "[restart]\nwhen_full = \"block\"", 2, "restart.when_full", `"wait", "lowest", "exit"`},
		{"on_gpu_lost enum", "[watch]\n\non_gpu_lost = \"restart\"", 3, "watch.on_gpu_lost", `must be one of "keep", "stop", got "restart"`},
		{"on_gpu_lost type", "[watch]\non_gpu_lost = false", 2, "watch.on_gpu_lost", "must be a string"},
		{"on_gpu_lost misplaced", "[restart]\non_gpu_lost = \"stop\"", 2, "restart.on_gpu_lost", "watch.on_gpu_lost"},
		// watermark ranges
		{"high above critical", "[watermark]\nhigh = 0.99", 2, "watermark.high", "must be below watermark.critical (0.97), got 0.99"},
		{"high equals critical", "[watermark]\nhigh = 0.97", 2, "watermark.high", "must be below watermark.critical"},
		{"critical below default high", "[watermark]\ncritical = 0.8", 2, "watermark.critical", "must be above watermark.high (0.9), got 0.8"},
		{"both set", "[watermark]\nhigh = 0.9\ncritical = 0.8", 2, "watermark.high", "must be below watermark.critical (0.8)"},
		{"low above high", "[watermark]\nlow = 0.95", 2, "watermark.low", "must be below watermark.high (0.9), got 0.95"},
		{"high below default low", "[watermark]\nhigh = 0.6\ncritical = 0.7", 2, "watermark.high", "must be above watermark.low (0.7), got 0.6"},
		{"critical above 1", "[watermark]\ncritical = 1.01", 2, "watermark.critical", "at most 1"},
		{"zero low", "[watermark]\nlow = 0", 2, "watermark.low", "above 0"},
		{"negative high", "[watermark]\nhigh = -0.5", 2, "watermark.high", "above 0"},
		{"nan", "[watermark]\nhigh = nan", 2, "watermark.high", "above 0"},
		// durations
		{"bad duration", "[watermark]\nsustain = \"1 second\"", 2, "watermark.sustain", "invalid duration"},
		{"negative duration", "[watermark]\ngrace = \"-1s\"", 2, "watermark.grace", "must not be negative"},
		{"zero interval", "[watch]\ninterval = \"0s\"", 2, "watch.interval", "at least 1ms"},
		{"absurd duration", "[restart]\nreset_after = \"1000000h\"", 2, "restart.reset_after", "at most 30d"},
		{"overflowing duration", "[restart]\nwindow = \"100000000000h\"", 2, "restart.window", "invalid duration"},
		{"zero window", "[restart]\nwindow = \"0s\"", 2, "restart.window", "at least 1s"},
		{"short lost_after", "[watch]\nlost_after = \"200ms\"", 2, "watch.lost_after", "at least 1s"},
		{"absurd lost_after", "[watch]\nlost_after = \"9999h\"", 2, "watch.lost_after", "at most 30d"},
		{"lost_after type", "[watch]\nlost_after = 10", 2, "watch.lost_after", "duration string"},
		{"min above interval", "[watch]\ninterval = \"100ms\"\nmin_interval = \"150ms\"", 3, "watch.min_interval", "must be at most watch.interval (100ms), got 150ms"},
		{"max below interval", "[watch]\nmax_interval = \"100ms\"", 2, "watch.max_interval", "must be at least watch.interval (200ms), got 100ms"},
		{"interval above written max", "[watch]\nmax_interval = \"500ms\"\n\ninterval = \"1s\"", 2, "watch.max_interval", "must be at least watch.interval (1s), got 500ms"},
		{"interval below written min", "[watch]\nmin_interval = \"50ms\"\ninterval = \"10ms\"", 2, "watch.min_interval", "must be at most watch.interval (10ms), got 50ms"},
		{"zero min_interval", "[watch]\nmin_interval = \"0s\"", 2, "watch.min_interval", "at least 1ms"},
		{"short settle", "[watch]\nsettle = \"10ms\"", 2, "watch.settle", "at least 100ms"},
		{"adaptive type", "[watch]\nadaptive = \"yes\"", 2, "watch.adaptive", "true or false"},
		{"negative lead", "[watermark]\nlead = \"-5s\"", 2, "watermark.lead", "must not be negative"},
		{"on_gpu_fault enum", "[restart]\non_gpu_fault = \"ignore\"", 2, "restart.on_gpu_fault", `must be one of "stop", "restart"`},
		{"priority range", "priority = 1001", 1, "priority", "between -1000 and 1000"},
		{"priority type", "priority = \"high\"", 1, "priority", "must be an integer"},
		{"priority misplaced", "[watch]\npriority = 5", 2, "watch.priority", "belongs at the top"},
		{"small journal", "[journal]\nmax_size = \"1KiB\"", 2, "journal.max_size", "at least 64 KiB"},
		{"journal files", "[journal]\nmax_files = -1", 2, "journal.max_files", "between 0 and 1000"},
		{"journal age", "[journal]\nmax_age = \"20000d\"", 2, "journal.max_age", "at most"},
		{"journal age syntax", "[journal]\nmax_age = \"6 months\"", 2, "journal.max_age", "invalid duration"},
		{"backoff above max", "[restart]\nbackoff = \"2m\"", 2, "restart.backoff", "must not exceed restart.backoff_max (1m), got 2m"},
		{"max below backoff", "[restart]\nbackoff_max = \"500ms\"", 2, "restart.backoff_max", "must be at least restart.backoff (1s)"},
		// integers
		{"negative restarts", "[restart]\nmax_restarts = -1", 2, "restart.max_restarts", "between 0 and"},
		{"huge restarts", "[restart]\nmax_restarts = 9223372036854775807", 2, "restart.max_restarts", "between 0 and"},
		{"negative keep", "[checkpoint]\nkeep = -1", 2, "checkpoint.keep", "between 0 and 100"},
		{"huge keep", "[checkpoint]\nkeep = 100000", 2, "checkpoint.keep", "between 0 and 100"},
		{"exit code 0", "[oom]\nexit_codes = [0]", 2, "oom.exit_codes[0]", "between 1 and 255"},
		{"exit code 256", "[oom]\nexit_codes = [1,\n256]", 3, "oom.exit_codes[1]", "between 1 and 255"},
		// signals
		{"bad stop signal", "[restart]\nstop_signal = \"SIGFOO\"", 2, "restart.stop_signal", `unknown signal "SIGFOO"`},
		{"no stop signal", "[restart]\nstop_signal = \"none\"", 2, "restart.stop_signal", "unknown signal"},
		{"stop signal STOP", "[restart]\nstop_signal = \"STOP\"", 2, "restart.stop_signal", "cannot be caught"},
		{"notify KILL", "[notify]\nsignal = \"SIGKILL\"", 2, "notify.signal", "cannot be caught"},
		{"signal type", "[notify]\nsignal = true", 2, "notify.signal", "signal name"},
		// sizes
		{"bad size", "[watch]\nquota = \"lots\"", 2, "watch.quota", `invalid size "lots"`},
		{"bad unit", "[[profile]]\nname = \"a\"\nneeds = \"9Gb/s\"", 3, "profile[0].needs", "unknown unit"},
		{"negative size", "[[profile]]\nname = \"a\"\nneeds = -1", 3, "profile[0].needs", "must not be negative"},
		// patterns
		{"bad regexp", "[oom]\npatterns = [\"ok\", \"(unclosed\"]", 2, "oom.patterns[1]", "invalid RE2 pattern"},
		{"perl regexp", "[oom]\npatterns = [\n  \"(?<=x)y\",\n]", 3, "oom.patterns[0]", "invalid RE2"},
		{"empty regexp", "[oom]\npatterns = [\"\"]", 2, "oom.patterns[0]", "empty string"},
		{"match-all regexp", "[oom]\npatterns = [\"x*\"]", 2, "oom.patterns[0]", "empty string"},
		// names and profiles
		{"bad name", "name = \"my server\"", 1, "name", "invalid instance name"},
		{"slash name", "name = \"../etc\"", 1, "name", "invalid instance name"},
		{"empty profiles", "profile = []", 1, "profile", "at least one profile"},
		{"missing profile name", "[[profile]]\nneeds = \"1GiB\"", 1, "profile[0]", "missing name"},
		{"empty profile name", "[[profile]]\nname = \"\"", 2, "profile[0].name", "letters, digits"},
		{"duplicate profile", "[[profile]]\nname = \"a\"\n[[profile]]\nname = \"b\"\n[[profile]]\nname = \"a\"", 6, "profile[2].name", `duplicate profile name "a" (also profile[0])`},
		{"bad env name", "[[profile]]\nname = \"a\"\nenv = { \"MAX BATCH\" = \"1\" }", 3, `profile[0].env."MAX BATCH"`, "invalid environment variable name"},
		{"dash env name", "[[profile]]\nname = \"a\"\n\nenv = { MAX-BATCH = \"1\" }", 4, "profile[0].env.MAX-BATCH", "invalid environment variable name"},
		{"digit env name", "[[profile]]\nname = \"a\"\n[profile.env]\n1X = \"1\"", 4, "profile[0].env.1X", "invalid environment variable name"},
		{"reserved env", "[[profile]]\nname = \"a\"\nenv.GPUGUARD_LEVEL = \"3\"", 3, "profile[0].env.GPUGUARD_LEVEL", "reserved"},
		{"second profile line", "[[profile]]\nname = \"a\"\n\n[[profile]]\nname = \"b\"\nlive = 1", 6, "profile[1].live", "true or false"},
		// command
		{"empty command", "command = []", 1, "command", "must not be empty"},
		{"empty program", "command = [\"\", \"x\"]", 1, "command[0]", "program must not be empty"},
		{"unknown var", "[[profile]]\nname = \"a\"\nenv = { X = \"1\" }\n[[profile]]\nname = \"b\"\n", 0, "", ""},
		{"command var", "command = [\n  \"serve\",\n  \"${X}\",\n]\n[[profile]]\nname = \"a\"\nenv = { X = \"1\" }\n[[profile]]\nname = \"b\"\n", 3, "command[1]", `unknown variable ${X} in argument "${X}": profile "b" has no X`},
		{"command var default", "command = [\"serve\", \"--batch=${MAX_BATCH}\"]", 1, "command[1]", `profile "default" has no MAX_BATCH`},
		{"command syntax", "command = [\"serve\", \"${MAX\"]", 1, "command[1]", "unterminated"},
		// metrics
		{"bad listen", "[metrics]\nlisten = \"9464\"", 2, "metrics.listen", "HOST:PORT"},
		{"bad port", "[metrics]\nlisten = \"localhost:http\"", 2, "metrics.listen", "invalid port"},
		// NUL
		{"nul", "[checkpoint]\npath = \"a\\u0000b\"", 2, "checkpoint.path", "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "p.toml", contractBackends())
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Parse error = %v (%T), want an ErrorList", err, err)
			}
			e := list[0]
			if e.File != "p.toml" || e.Line != tt.line || e.Key != tt.key || !strings.Contains(e.Msg, tt.msg) {
				t.Fatalf("got %q\n(line %d key %q), want line %d key %q msg containing %q", err, e.Line, e.Key, tt.line, tt.key, tt.msg)
			}
			// The message names file, line and key.
			prefix := fmt.Sprintf("p.toml:%d: ", tt.line)
			if tt.key != "" {
				prefix += tt.key + ": "
			}
			if !strings.HasPrefix(e.Error(), prefix) {
				t.Errorf("Error() = %q, want prefix %q", e.Error(), prefix)
			}
		})
	}
}

func TestParseReportsAllProblems(t *testing.T) {
	src := `name = "demo"
bogus = 1
[watch]
interval = "fast"
[watermark]
high = 0.99
[[profile]]
name = "a"
[[profile]]
name = "a"
live = "no"
`
	_, err := Parse([]byte(src), "policy.toml")
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		"policy.toml:2: bogus: unknown key",
		`policy.toml:4: watch.interval: invalid duration "fast"`,
		"policy.toml:6: watermark.high: must be below watermark.critical (0.97), got 0.99",
		`policy.toml:10: profile[1].name: duplicate profile name "a"`,
		"policy.toml:11: profile[1].live: must be true or false",
	}
	if len(list) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(list), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(list[i].Error(), w) {
			t.Errorf("problem %d = %q, want prefix %q", i, list[i].Error(), w)
		}
	}
	var first *Error
	if !errors.As(err, &first) || first != list[0] {
		t.Error("errors.As(*Error) should find the first problem")
	}
}

func TestParseErrorListIsCapped(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "bogus%d = 1\n", i)
	}
	_, err := Parse([]byte(b.String()), "p.toml")
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 100 {
		t.Fatalf("err = %v", err)
	}
	if n := strings.Count(err.Error(), "\n"); n != maxShown {
		t.Errorf("message has %d lines, want %d shown + a count", n+1, maxShown+1)
	}
	if !strings.Contains(err.Error(), "and 80 more problems") {
		t.Errorf("message does not count the rest: %q", err.Error()[len(err.Error())-60:])
	}
}

func TestParseHostile(t *testing.T) {
	var ladder strings.Builder
	for i := range MaxProfiles + 1 {
		fmt.Fprintf(&ladder, "[[profile]]\nname = \"p%d\"\n", i)
	}
	tests := []struct {
		name, src, want string
	}{
		{"huge ladder", ladder.String(), "profile: 257 profiles; a ladder may have at most 256"},
		{"huge file", strings.Repeat("# padding\n", MaxFileSize/10+1), "a policy may be at most 1 MiB"},
		{"absurd duration", "[watermark]\ngrace = \"1000000h\"", "at most 30d"},
		{"deep arrays", "x = " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000), "nested more than 32 deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "h.toml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte("name = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(good)
	if err != nil || p.Name != "x" || p.Source != good {
		t.Fatalf("Load = %+v, %v", p, err)
	}

	missing := filepath.Join(dir, "missing.toml")
	_, err = Load(missing)
	var e *Error
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &e) || e.File != missing {
		t.Fatalf("Load(missing) = %v", err)
	}
	if !strings.HasPrefix(err.Error(), missing+": cannot read policy: ") {
		t.Errorf("message %q", err)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[watch]\nbackend = \"gpu\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":2: watch.backend: ") {
		t.Errorf("Load(bad) = %v", err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("Load(directory) succeeded")
	}
}

func TestLoadOrDefault(t *testing.T) {
	t.Chdir(t.TempDir())
	p, err := LoadOrDefault("")
	if err != nil || p.Source != "" || p.Profiles[0].Name != "default" {
		t.Fatalf("without policy.toml: %+v, %v", p, err)
	}
	if _, err := LoadOrDefault("named.toml"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a named missing file must be an error, got %v", err)
	}
	if err := os.WriteFile(DefaultFile, []byte("name = \"here\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = LoadOrDefault("")
	if err != nil || p.Name != "here" || p.Source != DefaultFile {
		t.Fatalf("with policy.toml: %+v, %v", p, err)
	}
}

func TestProfileNames(t *testing.T) {
	for _, n := range []string{"default", "fp16", "llama-3.1_8b", "A1", strings.Repeat("x", 64)} {
		if err := validName(n); err != nil {
			t.Errorf("validName(%q): %v", n, err)
		}
	}
	for _, n := range []string{"", ".hidden", "-flag", "a/b", "a b", "é", strings.Repeat("x", 65), "..", "a\x00"} {
		if err := validName(n); err == nil {
			t.Errorf("validName(%q) accepted", n)
		}
	}
}

// TestIntervalBoundsFollow: a bound the file leaves out follows a written
// interval; --interval (SetInterval) widens the bounds the same way.
func TestIntervalBoundsFollow(t *testing.T) {
	p, err := Parse([]byte("[watch]\ninterval = \"10ms\"\n"), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Watch; w.MinInterval != 10*time.Millisecond || w.MaxInterval != time.Second {
		t.Errorf("interval 10ms alone: bounds %s..%s, want 10ms..1s", w.MinInterval, w.MaxInterval)
	}
	p, err = Parse([]byte("[watch]\ninterval = \"5s\"\n"), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Watch; w.MinInterval != 20*time.Millisecond || w.MaxInterval != 5*time.Second {
		t.Errorf("interval 5s alone: bounds %s..%s, want 20ms..5s", w.MinInterval, w.MaxInterval)
	}
	p = Default()
	p.SetInterval(3 * time.Millisecond)
	if w := p.Watch; w.Interval != 3*time.Millisecond || w.MinInterval != 3*time.Millisecond || w.MaxInterval != time.Second {
		t.Errorf("SetInterval(3ms): %+v", w)
	}
	p.SetInterval(2 * time.Second)
	if w := p.Watch; w.Interval != 2*time.Second || w.MinInterval != 3*time.Millisecond || w.MaxInterval != 2*time.Second {
		t.Errorf("SetInterval(2s): %+v", w)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"high", "high", 0},
		{"hihg", "high", 1}, // a transposition is one edit
		{"ihgh", "high", 1}, // at the start too
		{"ab", "ba", 1},
		{"intervall", "interval", 1},
		{"hig", "high", 1},
		{"", "abc", 3},
		{"abc", "ca", 3}, // the optimal string alignment form: no edits of a transposed pair
		{"backof", "backoff", 1},
		{"start_retires", "start_retries", 1},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := editDistance(tt.b, tt.a); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}
