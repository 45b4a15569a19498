package core

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

const (
	gib = uint64(1 << 30)
	mib = uint64(1 << 20)
)

// t0 is the tables' epoch, and at(d) the time d after it.
var t0 = time.Unix(1_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

// testPolicy is the supervisor's test policy: fp16 (10 GiB, restart),
// int8 (6 GiB, live), int4 (no needs estimate, live); high 0.90.
func testPolicy() *policy.Policy {
	return &policy.Policy{
		Name:    "t",
		Command: []string{"server", "--batch", "${MAX_BATCH}"},
		Watch:   policy.Watch{Backend: "sim", Interval: 100 * time.Millisecond, Scope: policy.ScopeDevice},
		Watermark: policy.Watermark{High: 0.90, Critical: 0.97, Low: 0.70,
			Sustain: time.Second, Grace: 5 * time.Second},
		Restart: policy.Restart{OnCrash: true, Backoff: time.Second, BackoffMax: 4 * time.Second,
			ResetAfter: time.Minute, MaxRestarts: 5, Window: 10 * time.Minute, StopSignal: syscall.SIGTERM,
			StopTimeout: 3 * time.Second, ReleaseTimeout: 5 * time.Second, WhenFull: policy.WhenFullWait},
		Notify:     policy.Notify{Signal: syscall.SIGUSR1},
		OOM:        policy.OOM{Patterns: []*regexp.Regexp{regexp.MustCompile(`CUDA out of memory`)}, ExitCodes: []int{42}, ScanStderr: true},
		Checkpoint: policy.Checkpoint{Keep: 3},
		Profiles: []policy.Profile{
			{Name: "fp16", Needs: 10 * gib, Env: map[string]string{"MAX_BATCH": "32"}},
			{Name: "int8", Needs: 6 * gib, Live: true, Env: map[string]string{"MAX_BATCH": "16"}},
			{Name: "int4", Live: true, Env: map[string]string{"MAX_BATCH": "8"}},
		},
	}
}

// TestJudgeFit: the profiles tried from the target down, each with its
// needs and verdict, against the GPU with the least room.
func TestJudgeFit(t *testing.T) {
	pol := testPolicy() // fp16 10 GiB, int8 6 GiB, int4 none; high 0.90
	two := func(used0, used1 uint64) []Device {
		return []Device{{Index: 0, UUID: "a", Total: 16 * gib, Used: used0}, {Index: 1, UUID: "b", Total: 16 * gib, Used: used1}}
	}
	for _, tc := range []struct {
		name      string
		from      int
		devs      []Device
		tried     string
		worst     int
		freeBytes uint64
	}{
		{"fits at once", 0, two(0, 0), "fp16:true", 0, 16 * gib},
		{"the worst GPU decides", 0, two(1*gib, 6*gib), "fp16:false,int8:true", 1, 10 * gib},
		{"down to no needs", 0, two(0, 10*gib), "fp16:false,int8:false,int4:true", 1, 6 * gib},
		{"from the target", 1, two(0, 0), "int8:true", 0, 16 * gib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := JudgeFit(pol, tc.from, tc.devs)
			var parts []string
			for _, tr := range j.Tried {
				parts = append(parts, tr.Profile+":"+map[bool]string{true: "true", false: "false"}[tr.Fits])
			}
			if got := strings.Join(parts, ","); got != tc.tried {
				t.Errorf("tried %s, want %s", got, tc.tried)
			}
			if j.Worst.Index != tc.worst || j.Free() != tc.freeBytes {
				t.Errorf("worst GPU %d with %d free, want %d with %d", j.Worst.Index, j.Free(), tc.worst, tc.freeBytes)
			}
			ev := j.Event(pol, "start", "x")
			if ev.Event != api.EventFit || *ev.FreeBytes != tc.freeBytes || ev.LimitBytes != 16*gib || *ev.GPUIndex != tc.worst {
				t.Errorf("event %+v", ev)
			}
		})
	}
}

// TestWakeFit: a wake into a profile with needs is judged as any step; a
// serving profile without needs is taken to need what the server used when
// it last served, so a GPU still as full as when it went to sleep keeps it
// asleep; without that figure it is judged as any step (it fits).
func TestWakeFit(t *testing.T) {
	pol := testPolicy()
	pol.Profiles = append(pol.Profiles, policy.Profile{Name: "asleep", NotServing: true, Live: true})
	tree := map[int]bool{7: true}
	at := time.Unix(1, 0)
	// The asleep server holds 256 MiB; a neighbour 11 GiB: 1.15 GiB left under high.
	full := &Reading{Devices: []Device{{Index: 0, Used: 11*gib + 256<<20, Total: 16 * gib}},
		Processes: []Process{{PID: 7, Device: 0, Used: 256 << 20}}, ProcessesAt: at}
	roomy := &Reading{Devices: []Device{{Index: 0, Used: 256 << 20, Total: 16 * gib}},
		Processes: []Process{{PID: 7, Device: 0, Used: 256 << 20}}, ProcessesAt: at}
	for _, tt := range []struct {
		name   string
		to     int
		r      *Reading
		served uint64
		fits   bool
	}{
		{"no needs, served 4 GiB, GPU full", 2, full, 4 * gib, false},
		{"no needs, served 4 GiB, room", 2, roomy, 4 * gib, true},
		{"no needs, served unknown", 2, full, 0, true},
		{"needs 6 GiB stated, GPU full", 1, full, gib, false},
		{"needs 6 GiB stated, room", 1, roomy, 40 * gib, true},
	} {
		why := WakeFit(pol, 3, tt.to, tt.r, tree, tt.served)
		if (why == "") != tt.fits {
			t.Errorf("%s: WakeFit = %q, want fits=%v", tt.name, why, tt.fits)
		}
	}
	if pol.Profiles[2].Needs != 0 {
		t.Error("WakeFit changed the policy's profile")
	}
}
