package core

import (
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

func TestBackoff(t *testing.T) {
	base, maxD := time.Second, 60*time.Second
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i, w := range want {
		if got := Backoff(i+1, base, maxD); got != w*time.Second {
			t.Errorf("failure %d: got %s, want %s", i+1, got, w*time.Second)
		}
	}
	if got := Backoff(5, 0, 0); got != 0 {
		t.Errorf("zero backoff: got %s", got)
	}
}

func TestRestartBudget(t *testing.T) {
	r := policy.Restart{Backoff: time.Second, BackoffMax: 8 * time.Second, ResetAfter: time.Minute,
		MaxRestarts: 3, Window: 10 * time.Minute}
	var b Budget
	now := time.Unix(0, 0)
	for i, want := range []time.Duration{1, 2, 4} {
		d, giveUp := b.Failure(now.Add(time.Duration(i)*time.Second), time.Second, r)
		if giveUp || d != want*time.Second {
			t.Fatalf("failure %d: delay %s giveUp %v, want %s", i, d, giveUp, want*time.Second)
		}
	}
	if _, giveUp := b.Failure(now.Add(5*time.Second), time.Second, r); !giveUp {
		t.Fatal("the 4th failure within the window must give up")
	}
	// Long after the window the budget is back, and a child that ran
	// reset_after resets the backoff.
	d, giveUp := b.Failure(now.Add(time.Hour), 2*time.Minute, r)
	if giveUp || d != time.Second {
		t.Fatalf("after the window: delay %s giveUp %v", d, giveUp)
	}
	var z Budget
	if _, giveUp := z.Failure(now, 0, policy.Restart{MaxRestarts: 0, Window: time.Minute}); !giveUp {
		t.Fatal("max_restarts = 0 gives up at the first failure")
	}
}

func TestPickProfile(t *testing.T) {
	gib := uint64(1 << 30)
	profiles := []policy.Profile{{Name: "fp16", Needs: 40 * gib}, {Name: "int8", Needs: 20 * gib}, {Name: "int4"}}
	dev := func(used uint64) []Device { return []Device{{Index: 0, Used: used, Total: 80 * gib}} }
	tests := []struct {
		name  string
		from  int
		devs  []Device
		quota uint64
		want  int
		ok    bool
	}{
		{"empty GPU fits the best", 0, dev(0), 0, 0, true},
		{"boundary: used + needs == total x high fits", 0, dev(32 * gib), 0, 0, true},
		{"one byte more does not", 0, dev(32*gib + 1), 0, 1, true},
		{"quota caps the total", 0, dev(0), 40 * gib, 1, true},
		{"from skips better profiles", 1, dev(0), 0, 1, true},
		{"no needs always fits", 0, dev(80 * gib), 0, 2, true},
		{"every GPU must fit", 0, []Device{{Used: 0, Total: 80 * gib}, {Index: 1, Used: 60 * gib, Total: 80 * gib}}, 0, 2, true},
	}
	pol := func(quota uint64, profiles []policy.Profile) *policy.Policy {
		return &policy.Policy{Profiles: profiles, Watch: policy.Watch{Scope: policy.ScopeDevice, Quota: quota},
			Watermark: policy.Watermark{High: 0.9}}
	}
	for _, tt := range tests {
		got, ok := PickProfile(pol(tt.quota, profiles), tt.from, tt.devs)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: got %d %v, want %d %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := PickProfile(pol(0, profiles[:2]), 0, dev(79*gib)); ok {
		t.Error("no profile fits a full GPU")
	}
}

func TestRatios(t *testing.T) {
	s := Reading{
		Devices:   []Device{{Index: 0, Used: 50, Total: 100}, {Index: 1, Used: 80, Total: 100}},
		Processes: []Process{{PID: 10, Device: 0, Used: 30}, {PID: 11, Device: 1, Used: 10}, {PID: 99, Device: 1, Used: 70}},
	}
	quota := func(q uint64) *policy.Policy {
		return &policy.Policy{Watch: policy.Watch{Scope: policy.ScopeDevice, Quota: q}}
	}
	if got := DeviceRatio(s.Devices, quota(0)); got != 0.8 {
		t.Errorf("device ratio: got %v, want 0.8 (the worst GPU)", got)
	}
	if got := DeviceRatio(s.Devices, quota(160)); got != 0.8 {
		t.Errorf("a quota above the total does not raise the limit: got %v", got)
	}
	if got := DeviceRatio(s.Devices, quota(50)); got != 1.6 {
		t.Errorf("quota 50: got %v, want 1.6", got)
	}
	tree := map[int]bool{10: true, 11: true}
	if got := ProcessRatio(s, tree, 80); got != 0.5 {
		t.Errorf("process ratio with quota: got %v, want 0.5 (40 of 80)", got)
	}
	if got := ProcessRatio(s, tree, 0); got != 0.3 {
		t.Errorf("process ratio without quota: got %v, want 0.3", got)
	}
}

func TestClassifyExit(t *testing.T) {
	pol := policy.Default()
	pol.OOM.ExitCodes = []int{42}
	tests := []struct {
		name string
		exit Exit
		told string
		want ExitKind
	}{
		{"clean", Exit{Code: 0}, "", ExitClean},
		{"crash", Exit{Code: 1, Stderr: []byte("ValueError: bad input\n")}, "", ExitCrash},
		{"signal", Exit{Code: -1, Signal: 9}, "", ExitCrash},
		{"torch traceback", Exit{Code: 1, Stderr: []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")}, "", ExitOOM},
		{"cublas", Exit{Code: 134, Stderr: []byte("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)")}, "", ExitOOM},
		{"xla", Exit{Code: 1, Stderr: []byte("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2G")}, "", ExitOOM},
		{"listed exit code", Exit{Code: 42}, "", ExitOOM},
		{"listed code but signalled", Exit{Code: -1, Signal: 42}, "", ExitCrash},
		{"told on the socket, exit 0", Exit{Code: 0}, "cuda oom", ExitOOM},
	}
	for _, tt := range tests {
		if got, _ := ClassifyExit(tt.exit, pol.OOM, tt.told); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestDiedOfNotify(t *testing.T) {
	sent := time.Unix(1000, 0)
	usr1 := Exit{Code: -1, Signal: syscall.SIGUSR1}
	for _, tc := range []struct {
		name   string
		e      Exit
		sig    syscall.Signal
		sentAt time.Time
		after  time.Duration
		want   bool
	}{
		{"killed by it just after", usr1, syscall.SIGUSR1, sent, 3 * time.Millisecond, true},
		{"at the window's end", usr1, syscall.SIGUSR1, sent, 5 * time.Second, true},
		{"after the window", usr1, syscall.SIGUSR1, sent, 5*time.Second + 1, false},
		{"never sent", usr1, syscall.SIGUSR1, time.Time{}, time.Millisecond, false},
		{"another signal", Exit{Code: -1, Signal: syscall.SIGTERM}, syscall.SIGUSR1, sent, time.Millisecond, false},
		{"exit 138 is not a signal", Exit{Code: 138}, syscall.SIGUSR1, sent, time.Millisecond, false},
		{"no notify signal", usr1, 0, sent, time.Millisecond, false},
		{"the policy's signal", Exit{Code: -1, Signal: syscall.SIGUSR2}, syscall.SIGUSR2, sent, time.Millisecond, true},
	} {
		now := sent.Add(tc.after)
		if tc.sentAt.IsZero() {
			now = sent
		}
		if got := DiedOfNotify(tc.e, tc.sig, tc.sentAt, now, 5*time.Second); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
