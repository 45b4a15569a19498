package policy

import (
	"fmt"
	"strings"
	"testing"
)

func ladderPolicy(t *testing.T) *Policy {
	t.Helper()
	p, err := Parse([]byte(`
[watch]
quota = "10GiB"
[[profile]]
name = "fp16"
needs = "9GiB"
env = { DTYPE = "float16", MAX_BATCH = "32", NOTE = "two words" }
[[profile]]
name = "int8"
needs = "4GiB"
live = true
env = { DTYPE = "int8", MAX_BATCH = "16" }
[[profile]]
name = "cpu"
live = true
`), "l.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProfileIndex(t *testing.T) {
	p := ladderPolicy(t)
	for name, want := range map[string]int{"fp16": 0, "int8": 1, "cpu": 2} {
		if got, ok := p.ProfileIndex(name); !ok || got != want {
			t.Errorf("ProfileIndex(%q) = %d, %v", name, got, ok)
		}
	}
	if _, ok := p.ProfileIndex("fp32"); ok {
		t.Error("ProfileIndex(fp32) found")
	}
}

func TestLimitAndFits(t *testing.T) {
	const gib = 1 << 30
	p := ladderPolicy(t)
	tests := []struct {
		scope        string
		quota, total uint64
		limit        uint64
	}{
		{ScopeDevice, 0, 16 * gib, 16 * gib},
		{ScopeDevice, 10 * gib, 16 * gib, 10 * gib},
		{ScopeDevice, 40 * gib, 16 * gib, 16 * gib}, // a quota cannot add memory
		{ScopeProcess, 10 * gib, 16 * gib, 10 * gib},
		{ScopeProcess, 0, 16 * gib, 16 * gib},
	}
	for _, tt := range tests {
		p.Watch.Scope, p.Watch.Quota = tt.scope, tt.quota
		if got := p.Limit(tt.total); got != tt.limit {
			t.Errorf("%s quota %d: Limit = %d, want %d", tt.scope, tt.quota, got, tt.limit)
		}
	}

	p.Watch.Scope, p.Watch.Quota = ScopeDevice, 0
	// 16 GiB x 0.90 = 14.4 GiB of budget.
	fits := []struct {
		level int
		used  uint64
		want  bool
	}{
		{0, 0, true},
		{0, 5 * gib, true},        // 14 GiB
		{0, 5*gib + gib/2, false}, // 14.5 GiB
		{1, 10 * gib, true},
		{1, 11 * gib, false},
		{2, 16 * gib, true}, // no estimate: always fits
	}
	for _, f := range fits {
		if got := p.Fits(f.level, f.used, 16*gib); got != f.want {
			t.Errorf("Fits(%d, used %s) = %v", f.level, FormatSize(f.used), got)
		}
	}
	// floor(16 GiB x 0.90) = 15461882265 bytes.
	for _, r := range []struct{ used, want uint64 }{
		{0, 15461882265}, {5 * gib, 15461882265 - 5*gib}, {15461882265, 0}, {16 * gib, 0},
	} {
		if got := p.Room(r.used, 16*gib); got != r.want {
			t.Errorf("Room(used %d) = %d, want %d", r.used, got, r.want)
		}
	}
}

func TestCheckpointResolve(t *testing.T) {
	tests := []struct{ path, want string }{
		{"", "/state/demo/checkpoint"},
		{"ckpt/model.pt", "/state/demo/ckpt/model.pt"},
		{"/data/x/../model.pt", "/data/model.pt"},
	}
	for _, tt := range tests {
		if got := (Checkpoint{Path: tt.path}).Resolve("/state/demo"); got != tt.want {
			t.Errorf("Resolve(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestWriteLadder(t *testing.T) {
	var b strings.Builder
	if err := ladderPolicy(t).WriteLadder(&b); err != nil {
		t.Fatal(err)
	}
	want := `LEVEL  PROFILE  NEEDS  LIVE          ENV
0      fp16     9 GiB  no (restart)  DTYPE=float16 MAX_BATCH=32 NOTE="two words"
1      int8     4 GiB  yes           DTYPE=int8 MAX_BATCH=16
2      cpu      -      yes           -
`
	if b.String() != want {
		t.Errorf("WriteLadder:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteSummary(t *testing.T) {
	var b strings.Builder
	p, err := Parse([]byte(full), "full.toml", contractBackends())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"name        llama\n",
		"priority    -20\n",
		"command     python3 serve.py --batch ${MAX_BATCH}\n",
		"watch       backend=sim interval=50ms (fixed) scope=process quota=20 GiB settle=8s\n",
		"watermark   low=0.5 high=0.85 critical=0.95 sustain=2s grace=5s recover_after=1m lead=30s\n",
		"max_restarts=0 window=1h when_full=exit on_gpu_fault=restart start_secs=0 (off) start_retries=2\n",
		"stop        signal=SIGINT timeout=10s release_timeout=0s\n",
		"notify      signal=none\n",
		fmt.Sprintf("patterns=%d built-in + 1 own, exit_codes=42, scan_stderr=false", len(BuiltinOOMPatterns())),
		"checkpoint  path=/data/ckpt.pt keep=0\n",
		"metrics     127.0.0.1:9464\n",
		"journal     max_size=1 MiB max_files=10 max_age=180d\n",
		"ladder (2 profiles, first = best quality):\n",
		"1      int8     20 GiB  yes           DTYPE=int8 MAX_BATCH=16\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
