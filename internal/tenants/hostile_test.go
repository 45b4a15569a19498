package tenants

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// within runs f and fails the test if it has not returned within d: a
// call stuck in open(2) on a FIFO would otherwise hang the test binary.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// plant makes a hostile file in the GPU's directory: a FIFO, a link to
// /dev/zero, an 8 GiB sparse file, or one with the given content.
func plant(t *testing.T, dir, name, kind string) {
	t.Helper()
	path := filepath.Join(dir, name)
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "zero":
		err = os.Symlink("/dev/zero", path)
	case "sparse":
		if err = os.WriteFile(path, nil, 0o600); err == nil {
			err = os.Truncate(path, 8<<30)
		}
	default:
		err = os.WriteFile(path, []byte(kind), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestHostileLeaseFiles: a FIFO, a link to /dev/zero or a sparse 8 GiB
// file named like another tenant's leases is void: a reservation is
// decided at once (before, open(2) on the FIFO never returned and held the
// admission lock for good; /dev/zero was read until memory ran out), and
// the next one is too.
func TestHostileLeaseFiles(t *testing.T) {
	w := newWorld(t)
	me, peer := w.coordinator("me"), w.coordinator("peer")
	defer me.Close()
	defer peer.Close()
	if err := peer.SetLeases([]string{gpuA}, 100); err != nil {
		t.Fatal(err)
	}
	dir, _ := GPUDir(w.dir, gpuA)
	for _, k := range []string{"fifo", "zero", "sparse"} {
		plant(t, dir, leasePrefix+"evil"+k, k)
		// The hostile file must be another live tenant's to be read at all.
		evil := w.coordinator("evil" + k)
		defer evil.Close()
		if err := evil.holdLive(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		within(t, time.Second, "Admit", func() {
			adm, err := me.Admit(context.Background(), []string{gpuA})
			if err != nil {
				t.Errorf("Admit %d: %v", i, err)
				return
			}
			if adm.Others[gpuA] != 100 {
				t.Errorf("Admit %d: others %v, want the peer's 100 alone", i, adm.Others)
			}
			adm.Release()
		})
	}
}

// TestHostileLocks: a FIFO or a link where a GPU's admission or decide
// lock belongs, or where a tenant's live lock belongs, is replaced by a
// lock file: nothing waits on it.
func TestHostileLocks(t *testing.T) {
	w := newWorld(t)
	dir, _ := GPUDir(w.dir, gpuA)
	plant(t, dir, admitLock, "fifo")
	plant(t, dir, decideLock, "zero")
	plant(t, filepath.Join(w.dir, gpusDir), livePrefix+"me", "fifo")
	plant(t, filepath.Join(w.dir, gpusDir), livePrefix+"ghost", "fifo")
	me := w.tenant("me", 0, 3, 1)
	within(t, time.Second, "Admit", func() {
		adm, err := me.coord.Admit(context.Background(), []string{gpuA})
		if err != nil {
			t.Errorf("Admit: %v", err)
			return
		}
		adm.Release()
	})
	within(t, time.Second, "Decide", func() {
		if o := me.propose(api.KindDown); o.Kind != Step {
			t.Errorf("Decide: %+v, want Step", o)
		}
	})
	if me.coord.alive("ghost") {
		t.Error("a tenant whose live file is a FIFO is alive")
	}
	for _, name := range []string{admitLock, decideLock} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v, %v; want a regular file", name, fi.Mode(), err)
		}
	}
}

// TestHostileInfoFiles: FIFOs, links and sparse files named t.<name> are
// void; a decision ranks the real tenants and is taken at once.
func TestHostileInfoFiles(t *testing.T) {
	w := newWorld(t)
	prop, low := w.tenant("prop", 9, 3, 1), w.tenant("low", -1, 3, 1)
	dir, _ := GPUDir(w.dir, gpuA)
	for _, k := range []string{"fifo", "zero", "sparse"} {
		plant(t, dir, infoPrefix+"evil"+k, k)
		evil := w.coordinator("evil" + k)
		defer evil.Close()
		if err := evil.holdLive(); err != nil {
			t.Fatal(err)
		}
	}
	within(t, time.Second, "Decide", func() {
		if o := prop.propose(api.KindDown); o.Kind != Yield || o.Record.To != "low" {
			t.Errorf("Decide: %+v, want a yield to low", o)
		}
	})
	if s := low.steps(); len(s) != 1 {
		t.Errorf("low executed %d steps, want 1", len(s))
	}
}

// TestVoidDecisionRecords: an empty or garbage claim at the head of the
// log, an empty one far ahead (d.999999), a FIFO claim, and one dated in
// the future, are void: a lone tenant still steps, at once, and the log
// does not grow with voids. (Before, every proposal claimed a seq below
// the empty d.999999, found it was not the newest, voided its own claim
// and held: no step ever, two files a proposal.)
func TestVoidDecisionRecords(t *testing.T) {
	for _, c := range []struct{ name, kind string }{
		{"d.999999", ""}, {"d.1", "garbage"}, {"d.1", "{"}, {"d.1", "fifo"}, {"d.1", "zero"}, {"d.1", "sparse"},
		{"d.1", `{"seq":1,"gpu":"` + gpuA + `","kind":"down","to":"x","by":"x","at":` + strconv.FormatInt(t0.Add(time.Hour).UnixNano(), 10) + `}`},
		{"d.1", `{"seq":7,"gpu":"` + gpuA + `","kind":"down","to":"x","by":"x","at":1}`},
	} {
		t.Run(c.name+" "+c.kind, func(t *testing.T) {
			w := newWorld(t)
			me := w.tenant("me", 0, 3, 1)
			dir, _ := GPUDir(w.dir, gpuA)
			plant(t, dir, c.name, c.kind)
			var o Outcome
			within(t, time.Second, "Decide", func() { o = me.propose(api.KindDown) })
			if o.Kind != Step {
				t.Fatalf("outcome %+v, want Step", o)
			}
			if _, err := me.execute(o.Claim); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) > 8 {
				t.Errorf("%d files after one step: %v", len(ents), ents)
			}
		})
	}
}

// TestForgedGraceIsBounded: a confirmed decision whose grace is 1e9 s
// holds the GPU no longer than a policy's grace can be (MaxDuration), and
// one dated in the future holds nothing.
func TestForgedGraceIsBounded(t *testing.T) {
	forged := []Entry{{Seq: 3, Claim: &Claim{Seq: 3, At: t0.UnixNano()}, End: &End{At: t0.UnixNano(), GraceSeconds: 1e9}}}
	if st := Evaluate(forged, t0.Add(policy.MaxDuration-time.Second)); !st.Hold {
		t.Errorf("within the bound: %+v, want Hold", st)
	}
	if st := Evaluate(forged, t0.Add(policy.MaxDuration)); st.Hold || st.Next != 4 {
		t.Errorf("past the bound: %+v, want no hold, next 4", st)
	}
	if d := forged[0].Decision(); d.GraceSeconds != policy.MaxDuration.Seconds() {
		t.Errorf("decision grace %v, want %v", d.GraceSeconds, policy.MaxDuration.Seconds())
	}
	future := []Entry{{Seq: 1, Claim: &Claim{Seq: 1, At: t0.Add(time.Hour).UnixNano()}, End: &End{At: t0.Add(time.Hour).UnixNano(), GraceSeconds: 10}}}
	if st := Evaluate(future, t0); st.Hold {
		t.Errorf("a decision dated in the future: %+v, want no hold", st)
	}
}

// TestForgedPriorityIsBounded: a tenant file that says priority -1e6 ranks
// as -1000, the policy's bound, and so ties with a real -1000 tenant on
// the next criteria (memory, then name).
func TestForgedPriorityIsBounded(t *testing.T) {
	w := newWorld(t)
	w.tenant("aaa", -1000, 3, 1)
	w.tenant("zzz", -1000, 3, 9) // uses more memory: first among equals
	forged := w.tenant("forged", -1000, 3, 1)
	forged.set(func(i *api.TenantInfo) { i.Priority, i.GraceSeconds = -1_000_000, 1e12 })
	me := w.coordinator("me")
	defer me.Close()
	dir, _ := GPUDir(w.dir, gpuA)
	cands := me.tenants(dir)
	for _, c := range cands {
		if c.Priority < -policy.MaxPriority || c.GraceSeconds > policy.MaxDuration.Seconds() {
			t.Errorf("%s: priority %d, grace %v: outside policy's ranges", c.Name, c.Priority, c.GraceSeconds)
		}
	}
	if r := Rank(api.KindDown, gpuA, cands); len(r) != 3 || r[0].Name != "zzz" {
		t.Errorf("ranked %v, want zzz first", r)
	}
}

// TestVoidStartClaims: garbage in the next s.N, an empty s.999999, a FIFO
// s.99999 and a claim dated in the future block no start (before: "claims
// keep racing" for ever, or open(2) on the FIFO never returned); a valid
// claim below a void one still holds its bound.
func TestVoidStartClaims(t *testing.T) {
	for _, c := range []struct{ name, kind string }{
		{"s.999999", ""}, {"s.1", "garbage"}, {"s.99999", "fifo"}, {"s.5", "zero"}, {"s.5", "sparse"},
		{"s.1", `{"seq":1,"by":"a","at":` + strconv.FormatInt(t0.Add(time.Hour).UnixNano(), 10) + `,"settle_seconds":5}`},
		{"s.1", `{"seq":1,"by":"../../etc/x","at":` + strconv.FormatInt(t0.UnixNano(), 10) + `,"settle_seconds":5}`},
	} {
		t.Run(c.name+" "+c.kind, func(t *testing.T) {
			w := newWorld(t)
			a := w.tenant("a", 0, 3, 1)
			a.set(func(i *api.TenantInfo) { i.Starting = true })
			me := w.tenant("me", 0, 3, 1)
			dir, _ := GPUDir(w.dir, gpuA)
			plant(t, dir, c.name, c.kind)
			within(t, time.Second, "ClaimStart", func() {
				if o := me.coord.ClaimStart(context.Background(), []string{gpuA}, time.Second); !o.Granted {
					t.Errorf("ClaimStart: %+v, want granted", o)
				}
			})
		})
	}
	// A real claim of a starting tenant, under a void newer one, holds.
	w := newWorld(t)
	a := w.tenant("a", 0, 3, 1)
	a.set(func(i *api.TenantInfo) { i.Starting = true })
	if o := a.coord.ClaimStart(context.Background(), []string{gpuA}, time.Second); !o.Granted {
		t.Fatal(o)
	}
	dir, _ := GPUDir(w.dir, gpuA)
	plant(t, dir, "s.2", "garbage")
	me := w.tenant("me", 0, 3, 1)
	if o := me.coord.ClaimStart(context.Background(), []string{gpuA}, time.Second); o.Granted || o.Holder != "a" {
		t.Errorf("under a void claim: %+v, want a wait on a", o)
	}
	w.clock.add(StartHoldFactor * time.Second)
	if o := me.coord.ClaimStart(context.Background(), []string{gpuA}, time.Second); !o.Granted {
		t.Errorf("past 10 x settle: %+v, want granted", o)
	}
}

// TestSweep: void records, unknown names and old temporary files are
// removed once older than the age; valid records, tenants' own files,
// the locks and anything young are kept.
func TestSweep(t *testing.T) {
	w := newWorld(t)
	me := w.tenant("me", 0, 3, 1)
	dir, _ := GPUDir(w.dir, gpuA)
	if o := me.propose(api.KindDown); o.Kind != Step {
		t.Fatal(o)
	}
	if err := me.coord.SetLeases([]string{gpuA}, 5); err != nil {
		t.Fatal(err)
	}
	// The decision started a background sweep of the directory (sweep.go):
	// let it end first, or it may take some of the planted files and the
	// count below falls short of them.
	me.coord.wg.Wait()
	void := map[string]string{"d.900": "", "d.901.ok": "x", "s.902": "{", "junk": "x", "d.99999999999999999999": "1",
		"t.evil": "fifo", "l.zero": "zero", "big": "sparse", tmpPrefix + "1": "x", "t.bad name": "{}"}
	for name, kind := range void {
		plant(t, dir, name, kind)
	}
	plant(t, dir, "young", "x")
	old := time.Now().Add(-time.Hour)
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		if de.Name() != "young" {
			tv := unix.NsecToTimeval(old.UnixNano())
			if err := unix.Lutimes(filepath.Join(dir, de.Name()), []unix.Timeval{tv, tv}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := sweep(dir, time.Now(), voidAfter); n != len(void) {
		t.Errorf("swept %d, want %d", n, len(void))
	}
	for name := range void {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was kept", name)
		}
	}
	for _, name := range []string{"d.1", "t.me", "l.me", decideLock, "young"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v, want kept", name, err)
		}
	}
}

// TestSweepRuns: a decision starts a sweep of its GPU's directory (in the
// background, at most every sweepEvery), which removes old junk.
func TestSweepRuns(t *testing.T) {
	w := newWorld(t)
	me := w.tenant("me", 0, 3, 1)
	dir, _ := GPUDir(w.dir, gpuA)
	for i := range 1000 {
		plant(t, dir, "junk"+strconv.Itoa(i), "x")
		old := time.Now().Add(-time.Hour)
		os.Chtimes(filepath.Join(dir, "junk"+strconv.Itoa(i)), old, old)
	}
	me.propose(api.KindDown)
	me.coord.wg.Wait()
	ents, _ := os.ReadDir(dir)
	if len(ents) > 8 {
		t.Errorf("%d files left after the sweep", len(ents))
	}
}
