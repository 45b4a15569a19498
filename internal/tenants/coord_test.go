package tenants

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// TestDecideSelf: the proposer ranks lowest, so it steps itself; the
// confirmed decision then holds every tenant for its grace, and the
// others note it from the log.
func TestDecideSelf(t *testing.T) {
	w := newWorld(t)
	low, high := w.tenant("low", -5, 3, 1), w.tenant("high", 5, 3, 9)
	o := low.propose(api.KindDown)
	if o.Kind != Step || o.Claim.Seq != 1 || o.Claim.By != "low" || !o.Shared || len(o.Peers) != 1 {
		t.Fatalf("outcome %+v, want Step of seq 1 with one peer", o)
	}
	if _, err := low.execute(o.Claim); err != nil {
		t.Fatal(err)
	}
	w.clock.add(time.Second) // the grace (1h) runs from the confirmation
	o2 := high.propose(api.KindDown)
	if o2.Kind != Hold || o2.Record.Seq != 1 || o2.Record.To != "low" || o2.Record.GraceSeconds != 3600 {
		t.Fatalf("second proposal: %+v, want Hold with low's decision to note", o2)
	}
	w.clock.add(time.Hour)
	if o3 := high.propose(api.KindDown); o3.Kind != Step && o3.Kind != Yield {
		t.Fatalf("after the grace: %+v, want a new decision", o3)
	}
}

// TestDecidePeer: another tenant ranks lowest: it executes the step, the
// proposer yields to it and the third tenant is told.
func TestDecidePeer(t *testing.T) {
	w := newWorld(t)
	prop, low, mid := w.tenant("prop", 9, 3, 1), w.tenant("low", -1, 3, 1), w.tenant("mid", 3, 3, 1)
	o := prop.propose(api.KindDown)
	if o.Kind != Yield || o.Record.To != "low" || o.Record.Seq != 1 || o.Record.Kind != api.KindDown {
		t.Fatalf("outcome %+v, want Yield to low", o)
	}
	if s := low.steps(); len(s) != 1 || s[0].By != "prop" || s[0].Watermark != 0.95 {
		t.Fatalf("low executed %+v, want one step decided by prop", s)
	}
	prop.coord.wg.Wait() // the announcement has been sent
	if n := mid.notes(); len(n) != 1 || n[0].To != "low" || n[0].Seq != 1 {
		t.Errorf("mid noted %+v, want low's decision", n)
	}
	if n := low.notes(); len(n) != 0 {
		t.Errorf("the executor was told about its own decision: %+v", n)
	}
}

// TestDecideUp: step-ups go to the highest priority below its first
// profile.
func TestDecideUp(t *testing.T) {
	w := newWorld(t)
	prop := w.tenant("prop", 0, 3, 1)
	low, high := w.tenant("low", -3, 3, 1), w.tenant("high", 3, 3, 1)
	low.set(func(i *api.TenantInfo) { i.Level = 2 })
	high.set(func(i *api.TenantInfo) { i.Level = 1 })
	if o := prop.propose(api.KindUp); o.Kind != Yield || o.Record.To != "high" {
		t.Fatalf("outcome %+v, want Yield to high", o)
	}
	if s := high.steps(); len(s) != 1 || s[0].Kind != api.KindUp {
		t.Fatalf("high executed %+v", s)
	}
}

// TestDecideNoCandidate: nobody can step lower.
func TestDecideNoCandidate(t *testing.T) {
	w := newWorld(t)
	a, b := w.tenant("a", 0, 2, 1), w.tenant("b", 1, 2, 1)
	for _, f := range []*fakeTenant{a, b} {
		f.set(func(i *api.TenantInfo) { i.Level = 1 })
	}
	if o := a.propose(api.KindCritical); o.Kind != NoCandidate || !o.Shared {
		t.Fatalf("outcome %+v, want NoCandidate", o)
	}
	if entries, _ := readDecisions(filepath.Join(w.dir, "gpus", gpuA)); len(entries) != 0 {
		t.Errorf("no candidate must claim nothing, log: %+v", entries)
	}
}

// TestDecidePassesOverRefusalAndSilence: a chosen tenant that refuses, or
// does not answer (hung: it accepts the request and never replies), is
// passed over, and the claim made for it is voided so it can never run
// late; the next tenant in the ranking steps, once.
func TestDecidePassesOverRefusalAndSilence(t *testing.T) {
	for _, mode := range []string{"refuses", "hangs"} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			prop, first, second := w.tenant("prop", 9, 3, 1), w.tenant("first", -9, 3, 1), w.tenant("second", 0, 3, 1)
			first.mu.Lock()
			if mode == "refuses" {
				first.refuse = errors.New("instance is waiting; try again once it runs")
			} else {
				first.hang = true
			}
			first.mu.Unlock()
			o := prop.propose(api.KindDown)
			if o.Kind != Yield || o.Record.To != "second" || o.Record.Seq != 2 {
				t.Fatalf("outcome %+v, want Yield to second with seq 2", o)
			}
			first.unhang()
			if len(second.steps()) != 1 || len(first.steps()) != 0 {
				t.Fatalf("steps: first %v, second %v; want exactly one, by second", first.steps(), second.steps())
			}
			// The claim for first is void: executing it late fails.
			first.mu.Lock()
			first.refuse, first.hang = nil, false
			first.mu.Unlock()
			if _, err := first.execute(api.TenantStep{GPU: gpuA, Seq: 1, Kind: api.KindDown, By: "prop", At: w.clock.Now().UnixNano()}); err == nil {
				t.Fatal("a voided claim was executed")
			}
		})
	}
}

// TestDecideExecutorStopsAfterConfirming: the chosen tenant confirms and
// then hangs before replying (SIGSTOPped mid-step). The decider cannot void
// the claim: it was executed, once, and nobody else steps.
func TestDecideExecutorStopsAfterConfirming(t *testing.T) {
	w := newWorld(t)
	prop, first, second := w.tenant("prop", 9, 3, 1), w.tenant("first", -9, 3, 1), w.tenant("second", 0, 3, 1)
	first.mu.Lock()
	first.hang, first.confirmFirst = true, true
	first.mu.Unlock()
	o := prop.propose(api.KindDown)
	if o.Kind != Yield || o.Record.To != "first" || o.Record.Seq != 1 {
		t.Fatalf("outcome %+v, want Yield to first", o)
	}
	if len(first.steps()) != 1 || len(second.steps()) != 0 {
		t.Fatalf("steps: first %v, second %v", first.steps(), second.steps())
	}
}

// TestDeadAndStoppedTenantsDropOut: a SIGKILLed tenant (its live lock is
// gone) is no candidate, even if it would rank first. A SIGSTOPped one
// (its lock held, its socket accepting but never answering) is chosen,
// passed over after PeerTimeout, and not waited for again soon.
func TestDeadAndStoppedTenantsDropOut(t *testing.T) {
	w := newWorld(t)
	prop, live := w.tenant("prop", 9, 3, 1), w.tenant("live", 5, 3, 1)
	w.publishedBy("killed", -10, false)
	w.publishedBy("stopped", -9, true)
	w.stopped("stopped")
	o := prop.propose(api.KindDown)
	if o.Kind != Yield || o.Record.To != "live" || o.Record.Seq != 2 {
		t.Fatalf("outcome %+v, want Yield to live after passing over stopped", o)
	}
	w.clock.add(2 * time.Hour)
	start := time.Now()
	if o := prop.propose(api.KindDown); o.Kind != Yield || o.Record.To != "live" || o.Record.Seq != 3 {
		t.Fatalf("second decision %+v, want live again at once", o)
	}
	if d := time.Since(start); d >= prop.coord.o.PeerTimeout {
		t.Errorf("the second decision waited %v for the stopped tenant again", d)
	}
	if n := len(live.steps()); n != 2 {
		t.Errorf("live stepped %d times, want 2", n)
	}
}

// TestStaleClaim: a decider that died (or was stopped) right after
// claiming leaves an unconfirmed claim: it holds the others for ClaimTTL,
// then it is voided and the next decision is taken.
func TestStaleClaim(t *testing.T) {
	w := newWorld(t)
	a := w.tenant("a", 0, 3, 1)
	dir, _ := GPUDir(w.dir, gpuA)
	if err := create(dir, decisionName(1), Claim{Seq: 1, GPU: gpuA, Kind: api.KindDown, To: "a", By: "gone", At: w.clock.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	w.clock.add(ClaimTTL - time.Millisecond)
	if o := a.propose(api.KindDown); o.Kind != Hold || o.Record.Seq != 0 {
		t.Fatalf("with a claim in flight: %+v, want Hold without a record", o)
	}
	w.clock.add(time.Millisecond)
	o := a.propose(api.KindDown)
	if o.Kind != Step || o.Claim.Seq != 2 {
		t.Fatalf("after ClaimTTL: %+v, want Step of seq 2", o)
	}
	entries, _ := readDecisions(dir)
	if len(entries) != 2 || entries[0].End == nil || !entries[0].End.Void {
		t.Fatalf("the stale claim must be voided: %+v", entries)
	}
	// Its tenant would now refuse it anyway, and cannot confirm it.
	if _, err := a.coord.Confirm(gpuA, 1, time.Second); err == nil {
		t.Fatal("confirmed a voided claim")
	}
}

// TestConcurrentDecisions: every tenant proposes at once, round after
// round. Each round exactly one step happens, by the lowest priority
// tenant that can still step: the ladder escalates from tenant to tenant.
func TestConcurrentDecisions(t *testing.T) {
	w := newWorld(t)
	fs := []*fakeTenant{w.tenant("c", 10, 3, 1), w.tenant("a", -10, 4, 1), w.tenant("b", 0, 3, 1)}
	// a has 3 steps, then b 2, then c 2; then nobody.
	want := []string{"a", "a", "a", "b", "b", "c", "c", "", ""}
	for round, who := range want {
		var wg sync.WaitGroup
		outs := make([]Outcome, len(fs))
		for i, f := range fs {
			wg.Go(func() { outs[i] = f.propose(api.KindDown) })
		}
		wg.Wait()
		for _, f := range fs {
			f.coord.wg.Wait()
		}
		var stepped []string
		for i, f := range fs {
			if o := outs[i]; o.Kind == Step {
				if _, err := f.execute(o.Claim); err != nil {
					t.Fatalf("round %d: %s could not execute its own claim: %v", round, f.info.Name, err)
				}
			}
		}
		for _, f := range fs {
			n := len(f.steps())
			f.mu.Lock()
			f.executed = nil
			f.mu.Unlock()
			for range n {
				stepped = append(stepped, f.info.Name)
			}
		}
		if who == "" {
			if len(stepped) != 0 {
				t.Fatalf("round %d: %v stepped, want nobody (all at their last profile)", round, stepped)
			}
			continue
		}
		if len(stepped) != 1 || stepped[0] != who {
			t.Fatalf("round %d: %v stepped, want exactly %s (outcomes %+v)", round, stepped, who, outs)
		}
		w.clock.add(2 * time.Hour) // past the grace of that step
	}
}

// TestClaimStart: one start at a time per GPU.
func TestClaimStart(t *testing.T) {
	w := newWorld(t)
	a, b := w.tenant("a", 0, 3, 1), w.tenant("b", 0, 3, 1)
	ctx := context.Background()
	a.set(func(i *api.TenantInfo) { i.Starting = true })
	if o := a.coord.ClaimStart(ctx, []string{gpuA}, 5*time.Second); !o.Granted {
		t.Fatalf("first claim: %+v", o)
	}
	b.set(func(i *api.TenantInfo) { i.Starting = true })
	if o := b.coord.ClaimStart(ctx, []string{gpuB, gpuA}, 5*time.Second); o.Granted || o.Holder != "a" || o.GPU != gpuA {
		t.Fatalf("while a starts: %+v, want a wait on a", o)
	}
	// gpuB comes after gpuA in UUID order, so b claimed nothing there.
	if starts, _ := readStarts(filepath.Join(w.dir, "gpus", gpuB), time.Now()); len(starts) != 0 {
		t.Errorf("b claimed %s while waiting for %s: %+v", gpuB, gpuA, starts)
	}
	a.set(func(i *api.TenantInfo) { i.Starting = false }) // settled
	if o := b.coord.ClaimStart(ctx, []string{gpuA, gpuB}, 5*time.Second); !o.Granted {
		t.Fatalf("after a settled: %+v", o)
	}
	// b is starting now; a restarts and must wait, until 10 x b's settle.
	if o := a.coord.ClaimStart(ctx, []string{gpuA}, time.Second); o.Granted || o.Holder != "b" {
		t.Fatalf("a while b starts: %+v", o)
	}
	w.clock.add(StartHoldFactor * 5 * time.Second)
	if o := a.coord.ClaimStart(ctx, []string{gpuA}, time.Second); !o.Granted {
		t.Fatalf("past 10 x b's settle: %+v", o)
	}
}

// TestClaimStartDeadOrStoppedHolder: a holder that was killed, or does not
// answer, holds nothing.
func TestClaimStartDeadOrStoppedHolder(t *testing.T) {
	w := newWorld(t)
	c := w.tenant("c", 0, 3, 1)
	dir, _ := GPUDir(w.dir, gpuA)
	w.dead("killed")
	w.stopped("stopped")
	for i, holder := range []string{"killed", "stopped"} {
		if err := create(dir, startName(int64(10+2*i)), StartClaim{Seq: int64(10 + 2*i), By: holder, At: w.clock.Now().UnixNano(), SettleSeconds: 60}); err != nil {
			t.Fatal(err)
		}
		if o := c.coord.ClaimStart(context.Background(), []string{gpuA}, time.Second); !o.Granted {
			t.Fatalf("holder %s: %+v", holder, o)
		}
	}
}

// TestClaimStartRace: tenants that claim at the same moment (each saying
// it is starting first) get one grant between them.
func TestClaimStartRace(t *testing.T) {
	w := newWorld(t)
	var fs []*fakeTenant
	for i := range 4 {
		f := w.tenant(fmt.Sprintf("t%d", i), 0, 3, 1)
		f.set(func(i *api.TenantInfo) { i.Starting = true })
		fs = append(fs, f)
	}
	for round := range 10 {
		var wg sync.WaitGroup
		granted := make([]bool, len(fs))
		for i, f := range fs {
			wg.Go(func() { granted[i] = f.coord.ClaimStart(context.Background(), []string{gpuA}, time.Second).Granted })
		}
		wg.Wait()
		n := 0
		for _, g := range granted {
			if g {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d grants, want 1", round, n)
		}
		w.clock.add(StartHoldFactor * time.Second) // that start is over
	}
}

// TestAdmit: a reservation sees the other tenants' published leases on
// its GPUs (a lease counts on every GPU its tenant watches), never its
// own, only while their tenant holds its live lock (a dead tenant's leases
// go with it, a stale file counts nothing), and waits at most LockWait for
// a GPU's admission lock.
func TestAdmit(t *testing.T) {
	w := newWorld(t)
	me, a, b := w.coordinator("me"), w.coordinator("a"), w.coordinator("b")
	for _, c := range []*Coordinator{me, a, b} {
		defer c.Close()
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(me.SetLeases([]string{gpuA}, 1000))
	must(a.SetLeases([]string{gpuA, gpuB}, 100))
	must(b.SetLeases([]string{gpuB}, 7))
	dir, _ := GPUDir(w.dir, gpuA)
	must(os.WriteFile(filepath.Join(dir, leasePrefix+"ghost"), []byte("5000"), 0o600)) // never held a live lock
	ctx := context.Background()
	adm, err := me.Admit(ctx, []string{gpuB, gpuA})
	must(err)
	if adm.Others[gpuA] != 100 || adm.Others[gpuB] != 107 {
		t.Errorf("others %v, want a's 100 on %s, a's and b's 107 on %s", adm.Others, gpuA, gpuB)
	}
	// While held, another tenant waits LockWait and gives up.
	if _, err := a.Admit(ctx, []string{gpuA}); !errors.Is(err, ErrLockHeld) {
		t.Errorf("second Admit while locked: %v, want ErrLockHeld", err)
	}
	adm.Release()
	adm, err = a.Admit(ctx, []string{gpuA})
	must(err)
	if adm.Others[gpuA] != 1000 {
		t.Errorf("a sees %v, want me's 1000", adm.Others)
	}
	adm.Release()

	// A release publishes the smaller figure; a dead tenant's leases go.
	must(b.SetLeases([]string{gpuB}, 0))
	a.Close() // its live lock goes, as when it dies
	adm, err = me.Admit(ctx, []string{gpuA, gpuB})
	must(err)
	if adm.Others[gpuA] != 0 || adm.Others[gpuB] != 0 {
		t.Errorf("others %v, want none", adm.Others)
	}
	adm.Release()
}

// TestOneDeciderAtATime: while another tenant holds the GPU's decide lock
// a proposal holds at once, without asking anybody; a holder that keeps
// it for ClaimTTL (hung, stopped) is ignored.
func TestOneDeciderAtATime(t *testing.T) {
	w := newWorld(t)
	a := w.tenant("a", 0, 3, 1)
	dir, _ := GPUDir(w.dir, gpuA)
	f, err := os.OpenFile(filepath.Join(dir, decideLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{0, 600 * time.Millisecond, 399 * time.Millisecond} {
		w.clock.add(step)
		if o := a.propose(api.KindDown); o.Kind != Hold || o.Shared {
			t.Fatalf("another tenant deciding (busy %v): %+v, want Hold", step, o)
		}
	}
	w.clock.add(time.Millisecond) // busy for ClaimTTL
	if o := a.propose(api.KindDown); o.Kind != Step {
		t.Fatalf("a decider stuck for ClaimTTL: %+v, want a decision without it", o)
	}
	f.Close()
	w.clock.add(time.Hour)
	if o := a.propose(api.KindDown); o.Kind != Step || o.Claim.Seq != 2 {
		t.Fatalf("lock free again: %+v", o)
	}
	// A new run of busy proposals starts its own count.
	w.clock.add(time.Hour)
	f2, _ := os.OpenFile(filepath.Join(dir, decideLock), os.O_RDWR, 0)
	defer f2.Close()
	syscall.Flock(int(f2.Fd()), syscall.LOCK_EX)
	if o := a.propose(api.KindDown); o.Kind != Hold {
		t.Fatalf("a new decider: %+v, want Hold", o)
	}
}

func TestWorthWriting(t *testing.T) {
	base := api.TenantInfo{Name: "a", Priority: 1, Scope: "device", State: api.StateRunning, Level: 1, Levels: 3,
		GPUs: []api.TenantGPU{{UUID: gpuA, UsedBytes: 1 << 30}}, GraceSeconds: 10, SettleSeconds: 5}
	with := func(mod func(*api.TenantInfo)) *api.TenantInfo {
		i := base
		i.GPUs = slices.Clone(base.GPUs)
		mod(&i)
		return &i
	}
	for _, tc := range []struct {
		name  string
		next  *api.TenantInfo
		since time.Duration
		want  bool
	}{
		{"nothing changed", with(func(*api.TenantInfo) {}), republishEvery - time.Millisecond, false},
		{"nothing changed, but republishEvery passed", with(func(*api.TenantInfo) {}), republishEvery, true},
		{"live figures are not published", with(func(i *api.TenantInfo) { i.Starting, i.LeasesBytes = true, 9 }), republishEvery - time.Millisecond, false},
		{"level", with(func(i *api.TenantInfo) { i.Level = 2 }), 0, true},
		{"state", with(func(i *api.TenantInfo) { i.State = api.StateStepping }), 0, true},
		{"state, no step possible", with(func(i *api.TenantInfo) { i.State = api.StateWaiting }), 0, true},
		{"state, stepping the same", with(func(i *api.TenantInfo) { i.State = api.StateStarting }), republishEvery - time.Millisecond, false},
		{"priority (a reload)", with(func(i *api.TenantInfo) { i.Priority = -1 }), 0, true},
		{"another GPU", with(func(i *api.TenantInfo) { i.GPUs[0].UUID = gpuB }), 0, true},
		{"usage within the tolerance", with(func(i *api.TenantInfo) { i.GPUs[0].UsedBytes += 60 << 20 }), republishEvery - time.Millisecond, false},
		{"usage beyond it", with(func(i *api.TenantInfo) { i.GPUs[0].UsedBytes += 100 << 20 }), time.Second, true},
		{"usage beyond it, but written within the second", with(func(i *api.TenantInfo) { i.GPUs[0].UsedBytes -= 100 << 20 }), 999 * time.Millisecond, false},
	} {
		if got := worthWriting(&base, tc.next, tc.since); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if !worthWriting(nil, &base, 0) {
		t.Error("the first info must be written")
	}
}

// TestPublishAndClose: published info reaches the GPU's directory (where
// the others read it); Close takes it away with the leases and the live
// lock, so the instance is no tenant any more.
func TestPublishAndClose(t *testing.T) {
	w := newWorld(t)
	c, other := w.coordinator("me"), w.coordinator("other")
	defer other.Close()
	info := api.TenantInfo{Name: "me", Priority: 3, Scope: "device", State: api.StateRunning, Levels: 2, GPUs: []api.TenantGPU{{UUID: gpuA}}}
	c.Publish(info)
	info.Level = 1
	c.Publish(info)
	dir, _ := GPUDir(w.dir, gpuA)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts := other.tenants(dir)
		if len(ts) == 1 && ts[0].Name == "me" && ts[0].Level == 1 && ts[0].Priority == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other tenant sees %+v", ts)
		}
		time.Sleep(time.Millisecond) // polling the file, not synchronising
	}
	if err := c.SetLeases([]string{gpuA}, 5); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if ts := other.tenants(dir); len(ts) != 0 {
		t.Errorf("after Close the other sees %+v", ts)
	}
	for _, f := range []string{infoPrefix + "me", leasePrefix + "me"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind", f)
		}
	}
	if c.alive("me") {
		t.Error("still alive after Close")
	}
	c.Publish(info) // harmless after Close
}

// TestPublishWakesOnlyForAChange: the supervisor publishes after every
// event of its loop; an info the writer would not write (nothing the
// others rank by changed) must not wake it.
func TestPublishWakesOnlyForAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		c := w.coordinator("me")
		defer c.Close()
		info := api.TenantInfo{Name: "me", Priority: 3, Scope: "device", State: api.StateRunning, Levels: 2, GPUs: []api.TenantGPU{{UUID: gpuA}}}
		c.Publish(info)
		synctest.Wait() // the writer has written it and waits for the next
		c.pub.mu.Lock()
		written := c.pub.last != nil
		c.pub.mu.Unlock()
		if !written {
			t.Fatal("the first info was never written")
		}
		// Count the wake-ups on a channel the writer does not read (it reads
		// the one it was started with); put that one back before Close.
		c.pub.mu.Lock()
		orig, wakes := c.pub.wake, make(chan struct{}, 1)
		c.pub.wake = wakes
		c.pub.mu.Unlock()
		defer func() {
			c.pub.mu.Lock()
			c.pub.wake = orig
			c.pub.mu.Unlock()
		}()
		live := info
		live.Starting, live.LeasesBytes = true, 5 // read live, never written
		c.Publish(live)
		if len(wakes) != 0 {
			t.Fatal("an info not worth writing woke the writer")
		}
		if n := testing.AllocsPerRun(100, func() { c.Publish(live) }); n != 0 {
			t.Errorf("publishing an info not worth writing: %v allocations, want 0", n)
		}
		info.Level = 1
		c.Publish(info)
		if len(wakes) != 1 {
			t.Fatal("a new level did not wake the writer")
		}
	})
}

// TestStartClaimsCollected: a tenant that restarts over and over (a crash
// loop) keeps between Keep and 2 x Keep start claims on disk, the newest
// among them; the collection runs off the start, and Close waits for it.
func TestStartClaimsCollected(t *testing.T) {
	w := newWorld(t)
	c := w.coordinator("a")
	const starts = 5*Keep + 3
	for i := range starts {
		if o := c.ClaimStart(context.Background(), []string{gpuA}, time.Second); !o.Granted {
			t.Fatalf("start %d: %+v", i, o)
		}
		w.clock.add(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	ents, _ := os.ReadDir(filepath.Join(w.dir, "gpus", gpuA))
	for _, de := range ents {
		if p, seq, _, ok := parseName(de.Name()); ok && p == startPrefix {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) < Keep || len(seqs) > 2*Keep || !slices.Contains(seqs, starts) {
		t.Errorf("start claims on disk: %v; want %d to %d of them, %d among them", seqs, Keep, 2*Keep, starts)
	}
}

// TestUnchangedInfoIsLookedAtNotRewritten: every republishEvery the
// writer looks at an unchanged info's file; as it wrote it, it stays (no
// new file in the GPU's dir, the same inode), and only one a stranger
// removed or spoiled is written again.
func TestUnchangedInfoIsLookedAtNotRewritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		c := w.coordinator("me")
		defer c.Close()
		info := api.TenantInfo{Name: "me", Priority: 3, Scope: "device", State: api.StateRunning, Levels: 2, GPUs: []api.TenantGPU{{UUID: gpuA}}}
		dir, _ := GPUDir(w.dir, gpuA)
		path := filepath.Join(dir, infoPrefix+"me")
		inode := func() uint64 {
			t.Helper()
			var st syscall.Stat_t
			if err := syscall.Lstat(path, &st); err != nil {
				t.Fatalf("the info file: %v", err)
			}
			return st.Ino
		}
		readable := func() bool {
			var got api.TenantInfo
			return readJSON(path, &got) && got.Priority == 3
		}
		// publishLater publishes the same info once republishEvery has
		// passed, and lets the writer do what it does with it.
		publishLater := func() {
			time.Sleep(republishEvery)
			c.Publish(info)
			synctest.Wait()
		}
		c.Publish(info)
		synctest.Wait()
		first := inode()
		for range 3 {
			publishLater()
			if got := inode(); got != first {
				t.Fatalf("an unchanged info was rewritten (inode %d, then %d)", first, got)
			}
		}
		os.Remove(path)
		publishLater()
		if _, err := os.Lstat(path); err != nil || !readable() {
			t.Fatalf("a removed info was not written again: %v", err)
		}
		if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		publishLater()
		if !readable() {
			t.Fatal("an info spoiled in place was not written again")
		}
		// A change is still written at once.
		before := inode()
		info.Level = 1
		c.Publish(info)
		synctest.Wait()
		if inode() == before {
			t.Error("a new level was not written")
		}
	})
}
