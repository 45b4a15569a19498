package supervisor

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/sharing"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
	"github.com/gpuguard/gpuguard/internal/tenants"
	"github.com/gpuguard/gpuguard/policy"
)

// TestSharedProposalStepsSelf: the watermark verdict goes to the
// coordinator; chosen, the instance confirms the claim, then steps, and
// proposes nothing more during its grace.
func TestSharedProposalStepsSelf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{DecideFunc: func(p api.Proposal, seq int64) api.Outcome {
			o := sharingtest.SelfStep(p, seq)
			o.Peers, o.Shared = []string{"/run/other.sock"}, true
			return o
		}}
		h := startHarness(t, livePolicy(), withCoord(fc))
		c := h.child()
		h.probe.setUsed(15 * gib) // 0.94 > 0.90
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		props, confirms, announced := fc.Proposals(), fc.Confirms(), fc.Announced()
		if len(props) != 1 || props[0].Kind != api.KindDown || props[0].GPU != fakeGPU || props[0].Self.Name != "t" ||
			props[0].Self.Level != 0 || props[0].Watermark < 0.93 {
			t.Fatalf("proposals %+v", props)
		}
		if len(confirms) != 1 || confirms[0].Seq != 1 || confirms[0].GraceSeconds != 5 {
			t.Fatalf("confirms %+v, want seq 1 with the 5s grace", confirms)
		}
		if len(announced) != 1 || announced[0].Kind != api.KindDown || announced[0].Seq != 1 {
			t.Fatalf("announced %+v", announced)
		}
		ev := h.rec.named(api.EventStepDown)
		if len(ev) != 1 || ev[0].Reason != api.ReasonWatermark || ev[0].To != "int8" || !strings.Contains(ev[0].Detail, "shared GPU "+fakeGPU) {
			t.Fatalf("stepdowns %+v", ev)
		}
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGUSR1}) {
			t.Fatalf("child got %v", sigs)
		}
		time.Sleep(3 * time.Second) // within grace
		synctest.Wait()
		if props := fc.Proposals(); len(props) != 1 {
			t.Fatalf("%d proposals within the grace, want 1", len(props))
		}
		time.Sleep(2 * time.Second) // grace over, sustain long since met
		synctest.Wait()
		if props := fc.Proposals(); len(props) != 2 {
			t.Fatalf("%d proposals after the grace, want 2", len(props))
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestSharedLoneDetail: without other tenants the step reads as a lone
// instance's: the rules' own detail.
func TestSharedLoneDetail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, livePolicy(), withCoord(&sharingtest.Coord{}))
		c := h.child()
		h.probe.setUsed(15 * gib)
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if ev := h.rec.named(api.EventStepDown); len(ev) != 1 || ev[0].Detail != "watermark 0.94 > 0.90" {
			t.Fatalf("stepdowns %+v", ev)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestSharedProposalAtTheLastProfile: at its last profile an instance
// still proposes (another tenant may step); when nobody can, it journals
// the rate-limited critical event as a lone instance does, and asks again
// only after a pause.
func TestSharedProposalAtTheLastProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{DecideFunc: func(p api.Proposal, _ int64) api.Outcome {
			return api.Outcome{Kind: api.OutcomeNoCandidate, Shared: true}
		}}
		h := startHarness(t, testPolicy(), withCoord(fc, func(c *Config, d *Deps) { c.StartLevel = 2 }))
		c := h.child()
		h.probe.setUsed(16 * gib) // 1.0 >= critical
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		props := fc.Proposals()
		if len(props) != 1 || props[0].Self.Level != 2 {
			t.Fatalf("proposals %+v, want one from the last profile", props)
		}
		crit := h.rec.named(api.EventCritical)
		if len(crit) != 1 || !strings.Contains(crit[0].Detail, "no tenant of shared GPU "+fakeGPU) || crit[0].GPU != fakeGPU {
			t.Fatalf("critical events %+v", crit)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		props = fc.Proposals()
		if n := len(props); n < 2 || n > 4 {
			t.Fatalf("%d proposals in 4s with nobody able to step, want one a second at most", n)
		}
		if n := len(h.rec.named(api.EventCritical)); n != 1 {
			t.Fatalf("%d critical events within the grace, want 1", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := len(h.rec.named(api.EventCritical)); n != 2 {
			t.Fatalf("%d critical events after the grace, want 2", n)
		}
		if len(h.rec.named(api.EventStepDown)) != 0 || len(c.gotSignals()) != 0 {
			t.Fatal("stepped with no candidate")
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestSharedYieldAndCadence: another tenant steps: a yield is journaled,
// nothing steps here, and no proposal comes before that tenant's grace
// has passed and the sustain timer has run again.
func TestSharedYieldAndCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{DecideFunc: func(p api.Proposal, seq int64) api.Outcome {
			return api.Outcome{Kind: api.OutcomeYield, Shared: true, Record: api.TenantDecision{GPU: p.GPU, Seq: seq,
				Kind: p.Kind, To: "batch", At: time.Now().UnixNano(), GraceSeconds: 10}}
		}}
		h := startHarness(t, livePolicy(), withCoord(fc))
		c := h.child()
		h.probe.setUsed(15 * gib)
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		y := h.rec.named(api.EventYield)
		if len(y) != 1 || y[0].To != "batch" || y[0].GPU != fakeGPU || y[0].Reason != api.ReasonWatermark {
			t.Fatalf("yields %+v", y)
		}
		if len(h.rec.named(api.EventStepDown)) != 0 || len(c.gotSignals()) != 0 {
			t.Fatal("stepped although another tenant did")
		}
		time.Sleep(9 * time.Second) // batch's grace runs to 10s after its step
		synctest.Wait()
		if props := fc.Proposals(); len(props) != 1 {
			t.Fatalf("%d proposals within the other tenant's grace, want 1", len(props))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if props := fc.Proposals(); len(props) != 2 {
			t.Fatalf("%d proposals after it, want 2", len(props))
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestSharedOneProposalInFlight: while the coordinator decides, the loop
// stays responsive and proposes nothing more; a hold without a record
// (a decision in flight elsewhere) lets the next sample propose again.
func TestSharedOneProposalInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		fc := &sharingtest.Coord{Block: block, DecideFunc: func(api.Proposal, int64) api.Outcome {
			return api.Outcome{Kind: api.OutcomeHold}
		}}
		h := startHarness(t, livePolicy(), withCoord(fc))
		c := h.child()
		h.probe.setUsed(15 * gib)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if props := fc.Proposals(); len(props) != 1 {
			t.Fatalf("%d proposals while one is in flight, want 1", len(props))
		}
		if st := h.sup.Status(); st.State != api.StateRunning {
			t.Fatalf("status %+v", st)
		}
		fc.Set(func(f *sharingtest.Coord) { f.Block = nil })
		close(block)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if props := fc.Proposals(); len(props) < 2 {
			t.Fatalf("%d proposals after the hold, want another", len(props))
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestSharedFailureDecidesAlone: a coordinator that cannot work (say the
// runtime dir is read-only) must not leave the GPU unprotected.
func TestSharedFailureDecidesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{DecideFunc: func(api.Proposal, int64) api.Outcome {
			return api.Outcome{Kind: api.OutcomeFailed, Err: errors.New("read-only file system")}
		}}
		h := startHarness(t, livePolicy(), withCoord(fc))
		c := h.child()
		h.probe.setUsed(15 * gib)
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if ev := h.rec.named(api.EventStepDown); len(ev) != 1 || ev[0].Reason != api.ReasonWatermark {
			t.Fatalf("stepdowns %+v", ev)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestSharedStepRefusedIsVoided: chosen, but the claim cannot be confirmed
// (its decider gave it up): no step, and the claim is voided.
func TestSharedStepRefusedIsVoided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{ConfirmErr: func(string, int64) error { return errVoided }}
		h := startHarness(t, livePolicy(), withCoord(fc))
		c := h.child()
		h.probe.setUsed(15 * gib)
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if voids := fc.Voids(); len(voids) == 0 || voids[0] != 1 {
			t.Fatalf("voids %v, want seq 1 first", voids)
		}
		if len(h.rec.named(api.EventStepDown)) != 0 || len(c.gotSignals()) != 0 {
			t.Fatal("stepped on a claim it could not confirm")
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestTenantStepRequest: what an instance does with another tenant's
// tenant_step.
func TestTenantStepRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		pol := livePolicy()
		h := startHarness(t, pol, withCoord(fc))
		c := h.child()
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		ctx := context.Background()
		now := func() int64 { return time.Now().UnixNano() }
		step := func(seq int64, kind string, at int64) (api.TenantDecision, error) {
			return h.sup.Admission().TenantStep(ctx, api.TenantStep{GPU: fakeGPU, Seq: seq, Kind: kind, By: "llm", At: at, Watermark: 0.95})
		}
		if _, err := step(3, api.KindDown, now()-int64(api.ClaimTTL)); err == nil || !strings.Contains(err.Error(), "claims expire") {
			t.Fatalf("a claim 1s old: %v, want a refusal", err)
		}
		if _, err := h.sup.Admission().TenantStep(ctx, api.TenantStep{GPU: "GPU-other", Seq: 3, Kind: api.KindDown, By: "llm", At: now()}); err == nil {
			t.Fatal("a GPU it does not watch must be refused")
		}
		if _, err := step(3, api.KindUp, now()); err == nil || !strings.Contains(err.Error(), "first profile") {
			t.Fatalf("a step up at the first profile: %v", err)
		}
		if confirms := fc.Confirms(); len(confirms) != 0 {
			t.Fatal("a refused step was confirmed")
		}
		d, err := step(3, api.KindDown, now())
		if err != nil || d.Seq != 3 || d.Kind != api.KindDown || d.GraceSeconds != 5 {
			t.Fatalf("a valid claim: %+v %v", d, err)
		}
		ev := h.rec.named(api.EventStepDown)
		if len(ev) != 1 || ev[0].Reason != api.ReasonWatermark || !strings.Contains(ev[0].Detail, "shared GPU "+fakeGPU) ||
			!strings.Contains(ev[0].Detail, "llm") {
			t.Fatalf("stepdowns %+v", ev)
		}
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGUSR1}) {
			t.Fatalf("child got %v", sigs)
		}
		if _, err := step(3, api.KindDown, now()); err == nil || !strings.Contains(err.Error(), "already executed") {
			t.Fatalf("the same seq again: %v", err)
		}
		if _, err := step(2, api.KindDown, now()); err == nil {
			t.Fatal("an older seq must be refused")
		}
		fc.Set(func(f *sharingtest.Coord) { f.ConfirmErr = func(string, int64) error { return errVoided } })
		if _, err := step(4, api.KindUp, now()); !errors.Is(err, errVoided) {
			t.Fatalf("a voided claim: %v", err)
		}
		if st := h.sup.Status(); st.Level != 1 {
			t.Fatalf("level %d after a voided claim, want 1", st.Level)
		}
		fc.Set(func(f *sharingtest.Coord) { f.ConfirmErr = nil })
		if _, err := step(5, api.KindUp, now()); err != nil {
			t.Fatal(err)
		}
		if up := h.rec.named(api.EventStepUp); len(up) != 1 || up[0].Reason != api.ReasonRecovered || up[0].To != "fp16" {
			t.Fatalf("stepups %+v", up)
		}
		// critical: a graceful restart one profile lower.
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
			if sig == syscall.SIGTERM {
				c.end(Exit{Code: 143})
			}
		})
		if _, err := step(6, api.KindCritical, now()); err != nil {
			t.Fatal(err)
		}
		c2 := h.child()
		if got := c2.env("GPUGUARD_PROFILE"); got != "int8" {
			t.Fatalf("critical restart into %s, want int8", got)
		}
		if ev := h.rec.named(api.EventStepDown); len(ev) != 2 || ev[1].Reason != api.ReasonCritical {
			t.Fatalf("stepdowns %+v", ev)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestTenantStepRefusedWhenNotTakingPart: an observing instance, and a
// process-scope one, are never chosen, and refuse if asked.
func TestTenantStepRefusedWhenNotTakingPart(t *testing.T) {
	for name, mod := range map[string]func(*Config, *Deps){
		"observe": func(c *Config, d *Deps) { c.Observe = true },
		"process": func(c *Config, d *Deps) { c.Policy.Watch.Scope = policy.ScopeProcess },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := &sharingtest.Coord{}
				h := startHarness(t, livePolicy(), withCoord(fc, mod))
				c := h.child()
				h.probe.setUsed(16 * gib)
				h.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: 16 * gib}})
				time.Sleep(3 * time.Second)
				synctest.Wait()
				if props := fc.Proposals(); len(props) != 0 {
					t.Fatalf("%s proposed %+v", name, props)
				}
				_, err := h.sup.Admission().TenantStep(context.Background(), api.TenantStep{GPU: fakeGPU, Seq: 9, Kind: api.KindDown, By: "x", At: time.Now().UnixNano()})
				if err == nil {
					t.Fatal("it took a step for another tenant")
				}
				if info := h.sup.Admission().TenantInfo(); info.Scope != map[string]string{"observe": "device", "process": "process"}[name] || info.Observe != (name == "observe") {
					t.Fatalf("info %+v", info)
				}
				c.end(Exit{})
				h.wait()
			})
		})
	}
}

// TestTenantDecisionNotes: a decision another tenant executed is noted
// once (one yield per decision), only for a GPU this instance watches, and
// holds its proposals for that tenant's grace.
func TestTenantDecisionNotes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		h := startHarness(t, livePolicy(), withCoord(fc))
		c := h.child()
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		ctx := context.Background()
		d := api.TenantDecision{GPU: fakeGPU, Seq: 7, Kind: api.KindCritical, To: "batch", At: time.Now().UnixNano(), GraceSeconds: 8}
		for range 2 {
			if err := h.sup.Admission().TenantDecision(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		other := d
		other.GPU, other.Seq = "GPU-other", 8
		h.sup.Admission().TenantDecision(ctx, other)
		y := h.rec.named(api.EventYield)
		if len(y) != 1 || y[0].To != "batch" || y[0].Reason != api.ReasonCritical || y[0].GPU != fakeGPU {
			t.Fatalf("yields %+v, want one for seq 7", y)
		}
		h.probe.setUsed(15 * gib)
		time.Sleep(7 * time.Second)
		synctest.Wait()
		if props := fc.Proposals(); len(props) != 0 {
			t.Fatalf("proposed within batch's grace: %+v", props)
		}
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if props := fc.Proposals(); len(props) != 1 {
			t.Fatalf("%d proposals after batch's grace, want 1", len(props))
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestTenantInfo: what the other tenants are told, without the loop.
func TestTenantInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := livePolicy()
		pol.Priority = -7
		pol.Watch.Settle = 2 * time.Second
		h := startHarness(t, pol, withCoord(&sharingtest.Coord{}))
		c := h.child()
		h.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: 3 * gib}, {PID: 99999, Device: 0, Used: 5 * gib}})
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		if _, err := h.sup.Admission().Reserve(context.Background(), admission.Request{Bytes: gib, Priority: "P1", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		info := h.sup.Admission().TenantInfo()
		want := api.TenantInfo{Name: "t", PID: info.PID, Priority: -7, Scope: "device", State: api.StateRunning, Level: 0, Levels: 3,
			GPUs: []api.TenantGPU{{UUID: fakeGPU, UsedBytes: 3 * gib}}, Starting: true, LeasesBytes: gib, GraceSeconds: 5, SettleSeconds: 2}
		if info.PID == 0 || !reflect.DeepEqual(info, want) {
			t.Fatalf("TenantInfo\n %+v\nwant\n %+v", info, want)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestStartWaitsForTheOtherTenant: while another tenant is starting no
// child is launched; once the start is granted the profile is chosen on a
// sample taken after the grant, so `needs` is checked against what the
// other tenant's child really uses.
func TestStartWaitsForTheOtherTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		var sup atomic.Pointer[Supervisor]
		var probe *fakeProbe
		var llmStarting atomic.Bool
		llmStarting.Store(true)
		fc.ClaimFunc = func(gpus []string) api.StartOutcome {
			if !slices.Equal(gpus, []string{fakeGPU}) {
				t.Errorf("claimed %v", gpus)
			}
			if s := sup.Load(); s != nil && !s.Admission().TenantInfo().Starting {
				t.Error("claiming without saying it is starting")
			}
			if llmStarting.Load() {
				return api.StartOutcome{Holder: "llm", GPU: fakeGPU}
			}
			// Between the sample that asked and the grant, llm's child
			// settled at 6 GiB: the profile must be chosen on a later one.
			probe.setUsed(6 * gib)
			return api.StartOutcome{Granted: true}
		}
		pol := testPolicy()
		pol.Watch.Settle = 2 * time.Second
		h := startHarness(t, pol, withCoord(fc, func(c *Config, d *Deps) { probe = d.Probe.(*fakeProbe) }))
		sup.Store(h.sup)
		time.Sleep(time.Second)
		synctest.Wait()
		h.noLaunch()
		if n := fc.Claimed(); n < 2 {
			t.Fatalf("%d claims in a second of waiting, want one a sample", n)
		}
		if info := h.sup.Admission().TenantInfo(); info.Starting {
			t.Fatal("still starting after a refused claim: the other tenant would wait on us")
		}
		llmStarting.Store(false)
		c := h.child()
		if got := c.env("GPUGUARD_PROFILE"); got != "int8" {
			t.Fatalf("started in %s; with 6 GiB used fp16's 10 GiB does not fit", got)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestStartNoClaimWhileNothingFits: with when_full = "wait" and no room,
// nothing is claimed (another tenant may start meanwhile).
func TestStartNoClaimWhileNothingFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		pol := testPolicy()
		pol.Profiles[2].Needs = 2 * gib
		h := startHarness(t, pol, withCoord(fc, func(c *Config, d *Deps) { d.Probe.(*fakeProbe).setUsed(15 * gib) }))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := fc.Claimed(); n != 0 {
			t.Fatalf("%d claims while nothing fits", n)
		}
		h.probe.setUsed(0)
		c := h.child()
		if fc.Claimed() != 1 {
			t.Fatalf("%d claims, want 1", fc.Claimed())
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestStartEnds: a start lasts until the child's memory has been flat for
// settle, it says ready, 10 x settle passes, or it exits.
func TestStartEnds(t *testing.T) {
	run := func(t *testing.T, name string, body func(h *harness, c *fakeChild)) {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pol := testPolicy()
				pol.Watch.Settle = 2 * time.Second
				h := startHarness(t, pol, withCoord(&sharingtest.Coord{}))
				c := h.child()
				if !h.sup.Admission().TenantInfo().Starting {
					t.Fatal("not starting right after the launch")
				}
				body(h, c)
				c.end(Exit{})
				h.wait()
			})
		})
	}
	starting := func(h *harness) bool { return h.sup.Admission().TenantInfo().Starting }
	run(t, "settled", func(h *harness, c *fakeChild) {
		grow := func(used uint64) {
			h.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: used}})
		}
		grow(2 * gib)
		time.Sleep(1500 * time.Millisecond)
		grow(4 * gib) // grows at 1.5s: flat from then
		time.Sleep(1900 * time.Millisecond)
		synctest.Wait()
		if !starting(h) {
			h.t.Fatal("settled before 2s of flat memory")
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if starting(h) {
			h.t.Fatal("still starting after 2s of flat memory")
		}
	})
	run(t, "ready", func(h *harness, c *fakeChild) {
		h.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: 2 * gib}})
		time.Sleep(300 * time.Millisecond)
		if err := h.sup.Admission().Ready(context.Background()); err != nil {
			h.t.Fatal(err)
		}
		if starting(h) {
			h.t.Fatal("still starting after ready")
		}
	})
	run(t, "10 x settle", func(h *harness, c *fakeChild) {
		for i := range 200 { // grows every 100ms, never settles
			h.probe.setProcs([]gpu.Process{{PID: c.pid, Device: 0, Used: uint64(i+1) * 80 << 20}})
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if elapsed := time.Duration(i+1) * 100 * time.Millisecond; starting(h) != (elapsed < 20*time.Second) {
				h.t.Fatalf("starting %v after %s of growth (cap 20s)", starting(h), elapsed)
			}
		}
	})
	run(t, "10 x settle while the probe fails", func(h *harness, c *fakeChild) {
		h.probe.setErr(errLost) // no reading: the start cannot settle, but still ends
		time.Sleep(19900 * time.Millisecond)
		synctest.Wait()
		if !starting(h) {
			h.t.Fatal("ended before 10 x settle")
		}
		time.Sleep(1200 * time.Millisecond) // the next sample after the cap
		synctest.Wait()
		if starting(h) {
			h.t.Fatal("still starting 10 x settle after the launch, with the probe failing")
		}
		h.probe.setErr(nil)
	})
	run(t, "device usage without processes", func(h *harness, c *fakeChild) {
		h.probe.setUsed(8 * gib) // grows once (no per-process figures)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if !starting(h) {
			h.t.Fatal("settled while the device memory grew")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if starting(h) {
			h.t.Fatal("still starting")
		}
	})
}

// TestStartEndsWhileProbeHangs: a probe call that hangs brings no result
// at all, yet a start still ends at 10 x settle, as while calls fail.
func TestStartEndsWhileProbeHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Watch.Settle = 2 * time.Second
		fp := &flakyProbe{}
		h := startHarness(t, pol, withCoord(&sharingtest.Coord{}, func(_ *Config, d *Deps) { fp.fakeProbe, d.Probe = d.Probe.(*fakeProbe), fp }))
		c := h.child()
		stuck := make(chan struct{})
		defer close(stuck)
		fp.set(nil, stuck)
		sleep(19900 * time.Millisecond)
		if !h.sup.Admission().TenantInfo().Starting {
			t.Fatal("ended before 10 x settle")
		}
		sleep(1200 * time.Millisecond) // hung ticks come every interval
		if h.sup.Admission().TenantInfo().Starting {
			t.Fatal("still starting 10 x settle after the launch, with a probe call hung")
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestStartEndsOnExit: a child that dies while starting frees the GPU for
// the other tenants at once.
func TestStartEndsOnExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		pol := testPolicy()
		pol.Watch.Settle = time.Hour
		h := startHarness(t, pol, withCoord(fc))
		c := h.child()
		c.end(Exit{Code: 1})
		synctest.Wait()
		if h.sup.Admission().TenantInfo().Starting {
			t.Fatal("still starting after the child exited")
		}
		time.Sleep(time.Second) // backoff
		c2 := h.child()
		if fc.Claimed() != 2 {
			t.Fatalf("%d claims, want one per start", fc.Claimed())
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestReserveCountsOtherTenants: a reservation counts the other tenants'
// leases on the GPU, and falls back when the GPU's admission lock cannot
// be had.
func TestReserveCountsOtherTenants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{AdmitFunc: func(gpus []string) (*api.Admission, error) {
			return &api.Admission{Others: map[string]uint64{fakeGPU: 8 * gib}}, nil
		}}
		h := startHarness(t, testPolicy(), withCoord(fc))
		c := h.child()
		h.probe.setUsed(4 * gib)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		ctx := context.Background()
		d0, err := h.sup.Admission().Reserve(ctx, admission.Request{Bytes: 2 * gib, Priority: "P1", TTL: time.Minute})
		d := d0
		if err != nil || d.Decision != admission.DecisionGPU || !strings.Contains(d.Reason, "8 GiB leased") {
			t.Fatalf("4 + 8 + 2 <= 14.4: %+v %v", d, err)
		}
		if p := fc.Published(); !slices.Equal(p, []uint64{0, 2 * gib}) {
			t.Fatalf("published leases %v, want none once the GPU is known, then the 2 GiB lease as soon as it is granted", p)
		}
		d, _ = h.sup.Admission().Reserve(ctx, admission.Request{Bytes: 2 * gib, Priority: "P2", TTL: time.Minute})
		if d.Decision != admission.DecisionDefer || !strings.Contains(d.Reason, "10 GiB leased") {
			t.Fatalf("4 + (2 own + 8 others) + 2 > 14.4: %+v", d)
		}
		fc.Set(func(f *sharingtest.Coord) {
			f.AdmitFunc = func([]string) (*api.Admission, error) {
				return nil, errors.New("the admission lock of GPU " + fakeGPU + ": " + tenants.ErrLockHeld.Error())
			}
		})
		d, _ = h.sup.Admission().Reserve(ctx, admission.Request{Bytes: 1, Priority: "P0", TTL: time.Minute})
		if d.Decision != admission.DecisionDeny || !strings.Contains(d.Reason, "held by a tenant that does not answer") {
			t.Fatalf("lock held: %+v", d)
		}
		if ev := h.rec.named(api.EventAdmission); len(ev) != 3 || ev[2].Decision != admission.DecisionDeny {
			t.Fatalf("admission events %+v", ev)
		}
		if err := h.sup.Admission().Release(ctx, d0.Lease); err != nil {
			t.Fatal(err)
		}
		time.Sleep(sharing.ReleasePublishDelay)
		synctest.Wait()
		if p := fc.Published(); !slices.Equal(p, []uint64{0, 2 * gib, 0}) {
			t.Fatalf("published leases %v, want 0 after the release", p)
		}
		// A lease the others cannot see is not granted.
		fc.Set(func(f *sharingtest.Coord) {
			f.AdmitFunc = nil
			f.LeaseErr = errors.New("no space left on device")
		})
		d, _ = h.sup.Admission().Reserve(ctx, admission.Request{Bytes: 1, Priority: "P2", TTL: time.Minute})
		if d.Decision != admission.DecisionDefer || d.Lease != "" || !strings.Contains(d.Reason, "no space left") {
			t.Fatalf("unpublished lease: %+v", d)
		}
		if n := h.sup.Status().Leases; n != 0 {
			t.Fatalf("%d leases held after an unpublished grant", n)
		}
		if ev := h.rec.named(api.EventAdmission); ev[len(ev)-1].Decision != admission.DecisionDefer {
			t.Fatalf("the journal's last admission %+v, want the defer", ev[len(ev)-1])
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestObservingTenantYields: an observing tenant takes no part in the
// decision, but another tenant's step is its yield like anyone's, and what
// it would have done waits for that step's grace: no `observe` event for a
// pressure another tenant already answered.
func TestObservingTenantYields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		h := startHarness(t, livePolicy(), withCoord(fc, func(c *Config, d *Deps) { c.Observe = true }))
		c := h.child()
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		h.probe.setUsed(15 * gib) // above high
		d := api.TenantDecision{GPU: fakeGPU, Seq: 3, Kind: api.KindDown, To: "batch", At: time.Now().UnixNano(), GraceSeconds: 5}
		if err := h.sup.Admission().TenantDecision(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second) // past its own sustain (1s), within batch's grace (5s)
		synctest.Wait()
		if y := h.rec.named(api.EventYield); len(y) != 1 || y[0].To != "batch" || y[0].GPU != fakeGPU {
			t.Fatalf("yields %+v, want one to batch", y)
		}
		if o := h.rec.named(api.EventObserve); len(o) != 0 {
			t.Fatalf("observe events within the stepper's grace: %+v", o)
		}
		time.Sleep(2 * time.Second) // past the grace: the pressure is its own again
		synctest.Wait()
		if o := h.rec.named(api.EventObserve); len(o) != 1 {
			t.Fatalf("%d observe events after the grace, want 1", len(o))
		}
		if props := fc.Proposals(); len(props) != 0 {
			t.Fatalf("an observing tenant proposed %+v", props)
		}
		c.end(Exit{})
		h.wait()
	})
}
