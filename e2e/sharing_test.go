package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/tenants"
)

// TestTenantsStepInPriorityOrder: three real instances share one
// simulated GPU. For 21 rounds the GPU is pushed just above high; each
// round exactly one tenant steps down, always the lowest priority one
// that still can: batch through its whole ladder, then embed, then llm.
// Then nobody can (a critical event, no step). Then the GPU empties and
// the step-ups go the other way: llm first, one at a time. Every decision
// is journaled as a yield by the two tenants that did not step.
func TestTenantsStepInPriorityOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const levels = 8
	use := func(l int) uint64 { return uint64(levels-l) * 256 * mib }
	pol := tenantPolicy(levels, use, `recover_after = "200ms"`)
	pol = strings.Replace(pol, "low = 0.10", "low = 0.50", 1)
	// A round fails if the stepped child has not shed its memory within
	// the grace (its tenant steps again): 500ms leaves a loaded machine
	// room, at 21 rounds of about one grace each.
	pol = strings.Replace(pol, `grace = "300ms"`, `grace = "500ms"`, 1)
	if !strings.Contains(pol, `grace = "500ms"`) {
		t.Fatal("the shared tenant policy has no grace = \"300ms\" to lengthen")
	}
	var ts []*tn
	for _, c := range []struct {
		name string
		prio int
	}{{"llm", 10}, {"batch", -10}, {"embed", 0}} {
		p := e.startTenant(c.name, c.prio, pol, tenantChild)
		ts = append(ts, &tn{proc: p, name: c.name, stateDir: e.stateDir + "/" + c.name, levels: levels, use: use})
	}
	llm, batch, embed := ts[0], ts[1], ts[2]
	e.waitRunning("llm", "batch", "embed")
	for _, tt := range ts {
		if l := tt.nextLevel(); l != 0 {
			t.Fatalf("%s started at level %d", tt.name, l)
		}
	}

	// status shows the priorities and the GPU's tenants, lowest first.
	code, out, stderr := e.runRaw([]string{"status", "--json", "--runtime-dir", e.runDir})
	var rep struct {
		Instances []api.Status `json:"instances"`
		GPUs      []api.GPU    `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("status --json: %d %v\n%s%s", code, err, out, stderr)
	}
	if len(rep.GPUs) != 1 || !slices.Equal(rep.GPUs[0].Tenants, []string{"batch", "embed", "llm"}) {
		t.Fatalf("status gpus %+v, want one GPU with tenants batch, embed, llm", rep.GPUs)
	}
	prios := map[string]int{}
	for _, st := range rep.Instances {
		prios[st.Name] = st.Priority
	}
	if prios["batch"] != -10 || prios["embed"] != 0 || prios["llm"] != 10 {
		t.Errorf("priorities %v", prios)
	}
	if code, out, _ := e.runRaw([]string{"status", "--runtime-dir", e.runDir}); code != 0 || !strings.Contains(out, "PRIO") ||
		!strings.Contains(out, "batch, embed, llm") {
		t.Errorf("status table:\n%s", out)
	}

	used := func() uint64 {
		var u uint64
		for _, tt := range ts {
			u += tt.use(tt.level)
		}
		return u
	}
	var order []*tn
	for _, tt := range []*tn{batch, embed, llm} {
		for range levels - 1 {
			order = append(order, tt)
		}
	}
	var lat []time.Duration
	for round, want := range order {
		// Just above high; the step frees 256 MiB: just below.
		t0 := time.Now()
		e.setOther(simHigh + 128*mib - used())
		if got := want.nextLevel(); got != want.level+1 {
			t.Fatalf("round %d: %s stepped to level %d, want %d", round, want.name, got, want.level+1)
		}
		lat = append(lat, time.Since(t0))
		want.level++
		for _, o := range ts {
			if o != want {
				o.quiet("round " + want.name)
			}
		}
	}
	slices.Sort(lat)
	t.Logf("%d rounds: pressure -> step at the right tenant: median %v, max %v", len(lat), lat[len(lat)/2], lat[len(lat)-1])

	// Nobody can step: above critical, the tenants say so, and nobody steps.
	e.setOther(simTotal - 64*mib - used())
	if !pfEventually(30*time.Second, func() bool {
		return len(batch.events(api.EventCritical))+len(embed.events(api.EventCritical))+len(llm.events(api.EventCritical)) > 0
	}) {
		t.Fatal("no critical event with every tenant at its last profile")
	}
	for _, tt := range ts {
		tt.quiet("at the last profiles")
	}

	// Empty: step-ups, highest priority first, one at a time. (The order
	// is read from the journals: two signals close together may reach a
	// shell child as one. The cadence from the GPU's decision log: see
	// decisionCadence.)
	e.setOther(0)
	if !pfEventually(60*time.Second, func() bool { return len(embed.events(api.EventStepUp)) > 0 }) {
		t.Fatal("embed never stepped up")
	}
	var ups []api.Event
	for _, tt := range ts {
		ups = append(ups, tt.events(api.EventStepUp)...)
	}
	slices.SortFunc(ups, func(a, b api.Event) int { return a.Time.Compare(b.Time) })
	if len(ups) < levels {
		t.Fatalf("%d step-ups by the time embed stepped up, want llm's %d first: %+v", len(ups), levels-1, ups)
	}
	for i, ev := range ups[:levels] {
		wantName, wantTo := "llm", levels-2-i
		if i == levels-1 {
			wantName, wantTo = "embed", levels-2
		}
		if ev.Name != wantName || ev.ToLevel == nil || *ev.ToLevel != wantTo || ev.Reason != api.ReasonRecovered {
			t.Fatalf("step-up %d: %s to %v (%s), want %s to level %d; all: %+v", i, ev.Name, ev.To, ev.Reason, wantName, wantTo, ups)
		}
	}
	// One at a time: each decision waits for the grace of the last.
	if n := decisionCadence(t, filepath.Join(e.runDir, "gpus", rep.GPUs[0].UUID)); n[api.KindUp] < levels-1 {
		t.Errorf("the decision log holds %d step-ups, want the last %d at least", n[api.KindUp], levels-1)
	}
	for _, tt := range ts {
		tt.signal(syscall.SIGTERM)
	}
	for _, tt := range ts {
		tt.wait()
	}

	// The journals: one step per decision, and every other tenant yielded.
	for _, tt := range ts {
		var down []api.Event
		for _, ev := range tt.events(api.EventStepDown) {
			down = append(down, ev)
			if ev.Reason != api.ReasonWatermark {
				t.Errorf("%s: stepdown %+v, want reason watermark", tt.name, ev)
			}
		}
		if len(down) != levels-1 {
			t.Errorf("%s: %d stepdowns, want %d", tt.name, len(down), levels-1)
		}
		to := map[string]int{}
		for _, ev := range tt.events(api.EventYield) {
			if ev.Reason == api.ReasonWatermark {
				to[ev.To]++
			}
			if ev.GPU != rep.GPUs[0].UUID {
				t.Errorf("%s: yield on GPU %q, want %q", tt.name, ev.GPU, rep.GPUs[0].UUID)
			}
		}
		want := map[string]int{}
		for _, o := range ts {
			if o != tt {
				want[o.name] = levels - 1
			}
		}
		if !mapsEqual(to, want) {
			t.Errorf("%s: yields to %v, want %v (one per decision another tenant took)", tt.name, to, want)
		}
	}
}

// decisionCadence checks that every confirmed decision in the GPU
// directory dir's decision log (d.SEQ and d.SEQ.ok, docs/sharing.md) was
// claimed no sooner than the grace of the one before it had passed since
// its confirmation, which is the rule the tenants keep, and answers how
// many of each kind it read. (The step events are no measure of it: each
// is stamped when its tenant's loop takes the step, a moment after the
// confirmation, by a lag that a loaded machine stretches unevenly.) The
// log keeps its newest 8 to 16 decisions.
func decisionCadence(t *testing.T, dir string) map[string]int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int
	for _, de := range ents {
		if s, ok := strings.CutPrefix(de.Name(), "d."); ok {
			if seq, err := strconv.Atoi(strings.TrimSuffix(s, ".ok")); err == nil && strings.HasSuffix(s, ".ok") {
				seqs = append(seqs, seq)
			}
		}
	}
	slices.Sort(seqs)
	kinds := map[string]int{}
	var last *tenants.End
	for _, seq := range seqs {
		var c tenants.Claim
		var en tenants.End
		if !readJSONFile(t, filepath.Join(dir, fmt.Sprintf("d.%d", seq)), &c) || !readJSONFile(t, filepath.Join(dir, fmt.Sprintf("d.%d.ok", seq)), &en) || en.Void {
			continue
		}
		kinds[c.Kind]++
		if last != nil {
			if next := time.Unix(0, last.At).Add(time.Duration(last.GraceSeconds * float64(time.Second))); time.Unix(0, c.At).Before(next) {
				t.Errorf("decision %d (%s) claimed %v after the confirmation of the one before, within its grace %gs",
					seq, c.Kind, time.Duration(c.At-last.At), last.GraceSeconds)
			}
		}
		last = &en
	}
	return kinds
}

// readJSONFile reads path's JSON into v; false when it is gone (the log
// collected it meanwhile).
func readJSONFile(t *testing.T, path string, v any) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return true
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTenantKilledOrStoppedMidDecision: the tenant chosen for a decision
// is SIGKILLed, or SIGSTOPped, while it executes it (its child does that
// on the step's signal). The decision is taken once, by it; the next one
// goes to the next tenant in the ranking within 1 s of the crossing being
// sustained: a dead tenant's socket refuses at once, a stopped one drops
// out after 500 ms without an answer. Resumed, the stopped tenant steps no
// more.
//
// Serial: it bounds the next decision's latency (2 s), which other tests'
// load on the CPUs would stretch.
func TestTenantKilledOrStoppedMidDecision(t *testing.T) {
	for _, sig := range []string{"KILL", "STOP"} {
		t.Run("SIG"+sig, func(t *testing.T) {
			e := newEnv(t)
			use := func(l int) uint64 { return []uint64{2 << 30, 1 << 30, 512 * mib}[l] }
			low := e.tenant("low", -10, 3, use, "VICTIM="+sig)
			mid, high := e.tenant("mid", 0, 3, use), e.tenant("high", 10, 3, use)
			ts := []*tn{low, mid, high}
			e.waitRunning("low", "mid", "high")
			for _, tt := range ts {
				tt.nextLevel()
			}
			st, err := e.statusOf("low")
			if err != nil {
				t.Fatal(err)
			}
			// A killed gpuguard cannot end its child's process group.
			t.Cleanup(func() { syscall.Kill(-st.ChildPID, syscall.SIGKILL) })
			used := func() uint64 {
				var u uint64
				for _, tt := range ts {
					u += tt.use(tt.level)
				}
				return u
			}

			// Round 1: low is chosen, and is killed or stopped as it steps.
			e.setOther(simHigh + 128*mib - used())
			if l := low.nextLevel(); l != 1 {
				t.Fatalf("low stepped to %d, want 1", l)
			}
			low.level = 1
			if sig == "KILL" {
				if code := low.wait(); code != 128+int(syscall.SIGKILL) {
					t.Fatalf("low's gpuguard ended with %d, want killed", code)
				}
				if !pfGone(st.ChildPID, 30*time.Second) {
					t.Fatal("low's child outlived its gpuguard")
				}
				low.use = func(int) uint64 { return 0 } // its memory is freed
			} else if !pfEventually(30*time.Second, func() bool { s, ok := pfReadStat(st.PID); return ok && s.state == 'T' }) {
				t.Fatal("low's gpuguard was not stopped")
			}
			mid.quiet("round 1")
			high.quiet("round 1")

			// Round 2: the next tenant decides without low.
			t0 := time.Now()
			e.setOther(simHigh + 128*mib - used())
			if l := mid.nextLevel(); l != 1 {
				t.Fatalf("mid stepped to %d, want 1", l)
			}
			lat := time.Since(t0)
			mid.level = 1
			high.quiet("round 2")
			// sustain (100ms) + a sample (50ms) + 1s for a tenant that does not
			// answer, with room for a loaded machine.
			t.Logf("SIG%s: pressure -> the next tenant's step: %v", sig, lat)
			if lat > 2*time.Second {
				t.Errorf("the next decision took %v with low %sed", lat, strings.ToLower(sig))
			}

			if sig == "STOP" {
				low.signal(syscall.SIGCONT)
				if !pfEventually(30*time.Second, func() bool { s, err := e.statusOf("low"); return err == nil && s.Level == 1 }) {
					t.Fatal("low does not answer after SIGCONT")
				}
			}
			for _, tt := range ts {
				select {
				case <-tt.done:
				default:
					tt.signal(syscall.SIGTERM)
					tt.wait()
				}
			}
			for _, tt := range ts {
				tt.quiet("after the rounds")
			}
			want := map[string]int{"low": 1, "mid": 1, "high": 0}
			for _, tt := range ts {
				if tt == low && sig == "KILL" {
					continue // its journal's last lines may have died with it
				}
				if n := len(tt.events(api.EventStepDown)); n != want[tt.name] {
					t.Errorf("%s: %d stepdowns, want %d", tt.name, n, want[tt.name])
				}
			}
		})
	}
}

// startChild prints "start NAME PROFILE NS", grows its memory to 7 GiB in
// two steps, prints "grown NAME NS" and, with $READY set, says ready on
// the socket ("ready NAME NS" just before), then idles.
const startChild = `
d="$GPUGUARD_SIM_DIR/0"
put() { printf '%s' "$1" > "$d/.$$" && mv "$d/.$$" "$d/$$"; }
echo "start $GPUGUARD_NAME $GPUGUARD_PROFILE $(date +%s%N)"
put 3221225472
sleep 0.3
put 7516192768
echo "grown $GPUGUARD_NAME $(date +%s%N)"
if [ -n "$READY" ]; then
  echo "ready $GPUGUARD_NAME $(date +%s%N)"
  python3 -c '
import os, socket
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["GPUGUARD_SOCKET"])
s.sendall(b"{\"type\":\"ready\"}\n")
print("reply", s.makefile().readline().strip())
'
fi
while :; do sleep 5 >/dev/null 2>&1 & s=$!; wait $s; done
`

// TestTenantsStartOneAtATime: two tenants launched at the same moment on
// one GPU, each with a child that takes 7 GiB as it starts. The second
// child starts only once the first has settled (its memory flat for
// settle) or said ready, and its profile is chosen against what the first
// really uses: fp16 (needs 8 GiB) no longer fits, int8 (4 GiB) does.
func TestTenantsStartOneAtATime(t *testing.T) {
	t.Parallel()
	for _, variant := range []string{"settle", "ready"} {
		t.Run(variant, func(t *testing.T) {
			settle, extra := "1s", []string{}
			if variant == "ready" {
				if _, err := exec.LookPath("python3"); err != nil {
					t.Skip("python3 is not installed")
				}
				settle, extra = "30s", []string{"READY=1"}
			}
			e := newEnv(t)
			pol := `[watch]
interval = "50ms"
settle = "` + settle + `"
[[profile]]
name = "fp16"
needs = "8GiB"
[[profile]]
name = "int8"
needs = "4GiB"
`
			ps := map[string]*proc{}
			for _, n := range []string{"a", "b"} {
				ps[n] = e.startTenant(n, 0, pol, startChild, extra...)
			}
			// Whichever starts first: its lines, then the other's start.
			times := map[string]time.Time{}
			profile := map[string]string{}
			lines := make(chan string, 64)
			for _, p := range ps {
				go func() {
					for l := range p.lines {
						lines <- l
					}
				}()
			}
			var first, second string
			deadline := time.After(60 * time.Second)
			for second == "" || (variant == "ready" && times["reply "+first].IsZero()) {
				select {
				case l := <-lines:
					f := strings.Fields(l)
					switch {
					case len(f) == 4 && f[0] == "start":
						profile[f[1]] = f[2]
						times["start "+f[1]] = nsTime(t, f[3])
						if first == "" {
							first = f[1]
						} else {
							second = f[1]
						}
					case len(f) == 3 && (f[0] == "grown" || f[0] == "ready"):
						times[f[0]+" "+f[1]] = nsTime(t, f[2])
					case len(f) >= 2 && f[0] == "reply":
						if !strings.Contains(l, `"ok":true`) {
							t.Fatalf("ready: %s", l)
						}
						times["reply "+first] = time.Now()
					}
				case <-deadline:
					t.Fatalf("no two starts within 60s: %v", times)
				}
			}
			if profile[first] != "fp16" || profile[second] != "int8" {
				t.Fatalf("profiles: first %s %s, second %s %s; want fp16 then int8 (checked against the first's 7 GiB)",
					first, profile[first], second, profile[second])
			}
			grown := times["grown "+first]
			gap := times["start "+second].Sub(grown)
			t.Logf("%s: %s grown -> %s started: %v", variant, first, second, gap)
			switch variant {
			case "settle":
				if gap < 900*time.Millisecond {
					t.Errorf("%s started %v after %s's memory last grew, before its settle (1s)", second, gap, first)
				}
			case "ready":
				if r := times["ready "+first]; times["start "+second].Before(r) {
					t.Errorf("%s started before %s said ready", second, first)
				}
				if gap > 10*time.Second {
					t.Errorf("%s waited %v: ready did not end %s's start (settle is 30s)", second, gap, first)
				}
			}
		})
	}
}

func nsTime(t *testing.T, s string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad time %q", s)
	}
	return time.Unix(0, n)
}

// TestTenantsAdmissionNeverOverAdmits: three instances on one GPU take
// reservations at the same moment, two each, of random sizes, 100 rounds.
// The GPU is never over-admitted: what they grant together always fits
// under high, because each decision counts every tenant's leases. Each
// round the first reservation decided fits alone, so some are granted.
func TestTenantsAdmissionNeverOverAdmits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	use := func(int) uint64 { return 1 << 30 }
	names := []string{"a", "b", "c"}
	for _, n := range names {
		e.tenant(n, 0, 2, use)
	}
	e.waitRunning(names...)
	// Each decision counts the usage of its instance's last sample: wait
	// until every instance has sampled all three children's memory, or a
	// decision made on a sample from before the last child wrote its usage
	// is right by what it saw and over by what the room below assumes.
	for _, n := range names {
		if !pfEventually(30*time.Second, func() bool {
			st, err := e.statusOf(n)
			return err == nil && len(st.GPUs) > 0 && st.GPUs[0].UsedBytes >= 3<<30
		}) {
			t.Fatalf("%s never sampled the three children's 3 GiB", n)
		}
	}
	ctx := withTimeout(t, 2*time.Minute)
	clients := map[string]*control.Client{}
	for _, n := range names {
		c, err := control.Dial(ctx, filepath.Join(e.runDir, n+".sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[n] = c
	}
	room := uint64(simHigh) - 3<<30 // high minus the children's 3 GiB
	rng := rand.New(rand.NewPCG(1, 2))
	var granted, refused int
	for round := range 100 {
		type res struct {
			inst  string
			bytes uint64
			reply map[string]any
			err   error
		}
		var reqs []res
		for _, n := range names {
			for range 2 {
				reqs = append(reqs, res{inst: n, bytes: (1 + rng.Uint64N(6)) << 30})
			}
		}
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				// One connection per request: requests on one connection are
				// answered one at a time.
				c, err := control.Dial(ctx, filepath.Join(e.runDir, reqs[i].inst+".sock"))
				if err != nil {
					reqs[i].err = err
					return
				}
				defer c.Close()
				reqs[i].reply, reqs[i].err = c.Request(ctx, map[string]any{"type": "reserve", "bytes": reqs[i].bytes,
					"priority": "P1", "tool": "t", "ttl": "5m"})
			})
		}
		wg.Wait()
		var sum, smallest uint64
		n := 0
		for _, r := range reqs {
			if r.err != nil {
				t.Fatalf("round %d: %v", round, r.err)
			}
			if smallest == 0 || r.bytes < smallest {
				smallest = r.bytes
			}
			if r.reply["decision"] == "gpu" {
				sum += r.bytes
				n++
			}
		}
		if sum > room {
			t.Fatalf("round %d: granted %d GiB together, over the %.1f GiB left under high: %+v", round, sum>>30, float64(room)/(1<<30), reqs)
		}
		if n == 0 {
			t.Fatalf("round %d: nothing granted although every request fits alone: %+v", round, reqs)
		}
		granted, refused = granted+n, refused+len(reqs)-n
		for _, r := range reqs {
			if lease, _ := r.reply["lease"].(string); lease != "" {
				if _, err := clients[r.inst].Request(ctx, map[string]any{"type": "release", "lease": lease}); err != nil {
					t.Fatalf("release: %v", err)
				}
			}
		}
	}
	t.Logf("100 rounds: %d granted, %d refused", granted, refused)
	if refused == 0 {
		t.Error("no reservation was ever refused: the rounds did not contend")
	}
}
