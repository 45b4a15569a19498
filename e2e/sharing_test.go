package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// TestTenantsStepInPriorityOrder: three real instances share one
// simulated GPU. For 21 rounds the GPU is pushed just above high; each
// round exactly one tenant steps down, always the lowest priority one
// that still can: batch through its whole ladder, then embed, then llm.
// Then nobody can (a critical event, no step). Then the GPU empties and
// the step-ups go the other way: llm first, one at a time. Every decision
// is journaled as a yield by the two tenants that did not step.
func TestTenantsStepInPriorityOrder(t *testing.T) {
	e := newEnv(t)
	const levels = 8
	use := func(l int) uint64 { return uint64(levels-l) * 256 * mib }
	pol := tenantPolicy(levels, use, `recover_after = "200ms"`)
	pol = strings.Replace(pol, "low = 0.10", "low = 0.50", 1)
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

	// Empty: step-ups, highest priority first, one at a time. (Read from
	// the journals: two signals close together may reach a shell child as
	// one.)
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
		// One at a time: the next waits for the grace of the last (300ms).
		if i > 0 && ev.Time.Sub(ups[i-1].Time) < 250*time.Millisecond {
			t.Errorf("step-ups %d and %d only %v apart", i-1, i, ev.Time.Sub(ups[i-1].Time))
		}
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
