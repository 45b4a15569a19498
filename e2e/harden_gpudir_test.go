package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
)

// TestGPUDirFaultInjection: while three tenants share a GPU that keeps
// crossing high, the GPU's directory in the runtime dir is filled with
// what a careless operator or an attacker of the same uid could leave:
// FIFOs, links to /dev/zero and 8 GiB sparse files named like lease, info
// and claim records, empty and garbage decision and start claims (one far
// ahead, d.N+1000 and s.N+1000, as `: > d.999999` was), and 10,000 junk
// files. A fake tenant ("evil") holds a live lock, so its hostile files
// are read, not skipped. The invariants: every reservation is answered
// within 1 s; every step happens, one per grace, in priority order; a
// tenant that starts meanwhile is not held beyond 10 x settle (plus its
// start-up); no gpuguard's peak RSS passes 64 MiB; and the junk is swept.
//
// Under GPUGUARD_SOAK=1 (scripts/soak.sh) the cycle repeats for
// GPUGUARD_SOAK_GPUDIR_SECONDS (600), planting a fresh set every cycle.
func TestGPUDirFaultInjection(t *testing.T) {
	t.Parallel()
	plain, err := pfPlain()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	const levels = 3
	use := func(l int) uint64 { return uint64(levels-l) * 256 * mib }
	pol := tenantPolicy(levels, use, `recover_after = "200ms"`)
	pol = strings.Replace(pol, "low = 0.10", "low = 0.50", 1)
	const grace = 500 * time.Millisecond
	pol = strings.Replace(pol, `grace = "300ms"`, `grace = "500ms"`, 1)
	start := func(name string, prio int, policy string) *proc {
		p, sc := e.path(name+".toml"), e.path(name+".sh")
		os.WriteFile(p, []byte(policy), 0o644)
		os.WriteFile(sc, []byte(tenantChild), 0o644)
		return pfStartWith(e, plain, []string{"run", "--name", name, "--priority", strconv.Itoa(prio), "--policy", p,
			"--backend", "sim", "--sim-dir", e.path("sim"), "--state-dir", filepath.Join(e.stateDir, name), "--", "/bin/sh", sc})
	}
	var ts []*tn
	for _, c := range []struct {
		name string
		prio int
	}{{"llm", 10}, {"batch", -10}, {"embed", 0}} {
		ts = append(ts, &tn{proc: start(c.name, c.prio, pol), name: c.name, stateDir: filepath.Join(e.stateDir, c.name), levels: levels, use: use})
	}
	e.waitRunning("llm", "batch", "embed")
	order := []*tn{ts[1], ts[2], ts[0]} // batch, embed, llm: lowest priority first
	st, err := e.statusOf("llm")
	if err != nil || len(st.GPUs) != 1 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	gpuDir := filepath.Join(e.runDir, "gpus", st.GPUs[0].UUID)
	if _, err := os.Stat(gpuDir); err != nil {
		t.Fatalf("the GPU's dir: %v", err)
	}
	// "evil" holds its live lock for the whole test: its files count.
	live, err := os.OpenFile(filepath.Join(e.runDir, "gpus", "live.evil"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := unix.Flock(int(live.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// The late tenant cannot step (one profile): it takes part in the
	// start order only, and does not change the step order.
	latePol := strings.SplitN(pol, "[[profile]]", 2)[0] + "[[profile]]\nname = \"only\"\nlive = true\nenv = { USE = \"1\" }\n"

	seconds := pfSize("GPUDIR_SECONDS", 0, 600)
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	var reserveMax, startMax time.Duration
	cycles, steps := 0, 0
	for {
		cycles++
		planted := plantHostile(t, gpuDir, cycles)
		// Steps in priority order, each at its tenant, one per round.
		used := func() uint64 {
			var u uint64
			for _, tt := range ts {
				u += tt.use(tt.level)
			}
			return u
		}
		for _, want := range order {
			for range levels - 1 {
				e.setOther(simHigh + 128*mib - used())
				waitLevel(t, want, want.level+1)
				want.level++
				steps++
				for _, o := range ts {
					if s, err := e.statusOf(o.name); err != nil || s.Level != o.level {
						t.Fatalf("cycle %d, %s's step: %s at level %d (%v), want %d", cycles, want.name, o.name, s.Level, err, o.level)
					}
				}
				if d := reserveAll(t, e, ts); d > reserveMax {
					reserveMax = d
				}
			}
		}
		// A tenant that starts now is not held by the hostile claims.
		t0 := time.Now()
		late := start("late", 100, latePol)
		e.waitRunning("late")
		if d := time.Since(t0); d > startMax {
			startMax = d
		}
		late.signal(syscall.SIGTERM)
		late.wait()
		// Empty again: every tenant steps back up to its first profile.
		e.setOther(0)
		for _, tt := range ts {
			if !pfEventually(60*time.Second, func() bool { s, err := e.statusOf(tt.name); return err == nil && s.Level == 0 }) {
				t.Fatalf("cycle %d: %s did not step back up", cycles, tt.name)
			}
			// Read its child's lines up to the last step-up's, so that
			// the next cycle reads only new steps.
			for tt.nextLevel() != 0 {
			}
			tt.level = 0
		}
		// The junk goes at the next sweep once it is 10 s old.
		if !pfEventually(60*time.Second, func() bool {
			ents, _ := os.ReadDir(gpuDir)
			return len(ents) < 64
		}) {
			ents, _ := os.ReadDir(gpuDir)
			t.Fatalf("cycle %d: %d files left of %d planted", cycles, len(ents), planted)
		}
		if !time.Now().Before(deadline) {
			break
		}
	}
	var peak []int
	for _, tt := range ts {
		peak = append(peak, pfStatus(tt.cmd.Process.Pid, "VmHWM"))
	}
	for _, tt := range ts {
		tt.signal(syscall.SIGTERM)
	}
	for _, tt := range ts {
		tt.wait()
	}
	t.Logf("%d cycles, %d steps; slowest reservation %v, slowest start %v, peak RSS %v kB", cycles, steps, reserveMax, startMax, peak)
	if reserveMax > time.Second {
		t.Errorf("a reservation took %v, want at most 1s", reserveMax)
	}
	// 10 x settle (1 s), plus the start-up of a gpuguard on a loaded machine.
	if startMax > 10*100*time.Millisecond+5*time.Second {
		t.Errorf("a start took %v", startMax)
	}
	for i, kb := range peak {
		if kb <= 0 || kb > 64<<10 {
			t.Errorf("%s: peak RSS %d kB, want under 64 MiB", ts[i].name, kb)
		}
	}
	// The journals: every step down was taken once, in order, one per grace.
	var downs []api.Event
	for _, tt := range ts {
		ev := tt.events(api.EventStepDown)
		if len(ev) != cycles*(levels-1) {
			t.Errorf("%s: %d stepdowns, want %d", tt.name, len(ev), cycles*(levels-1))
		}
		downs = append(downs, ev...)
	}
	// An event is stamped when the executing tenant's loop journals it,
	// after the confirmation that starts the grace: on a loaded machine
	// that lags by up to a sample or two, hence the margin. (A second
	// step within the grace would also have failed the level checks.)
	slices.SortFunc(downs, func(a, b api.Event) int { return a.Time.Compare(b.Time) })
	minGap := time.Hour
	defer func() { t.Logf("closest stepdowns: %v apart (grace %v)", minGap, grace) }()
	for i := 1; i < len(downs); i++ {
		gap := downs[i].Time.Sub(downs[i-1].Time)
		minGap = min(minGap, gap)
		if gap < grace-250*time.Millisecond {
			t.Errorf("stepdowns %d (%s) and %d (%s) only %v apart: %+v / %+v", i-1, downs[i-1].Name, i, downs[i].Name, gap, downs[i-1], downs[i])
		}
	}
}

// waitLevel reads the tenant's level lines until it reports level, within
// a minute (a step-up's line may still be on its way).
func waitLevel(t *testing.T, tt *tn, level int) {
	t.Helper()
	for {
		if got := tt.nextLevel(); got == level {
			return
		} else if got > level {
			t.Fatalf("%s went to level %d, want %d", tt.name, got, level)
		}
	}
}

// reserveAll asks every tenant for a 1-byte reservation and returns the
// slowest answer; one that does not come within 1 s fails the test.
func reserveAll(t *testing.T, e *env, ts []*tn) time.Duration {
	t.Helper()
	var slowest time.Duration
	for _, tt := range ts {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := control.Dial(ctx, filepath.Join(e.runDir, tt.name+".sock"))
		if err == nil {
			_, err = c.Request(ctx, map[string]any{"type": "reserve", "bytes": 1, "ttl": "1s", "tool": "fault-injection"})
			c.Close()
		}
		cancel()
		if err != nil {
			t.Fatalf("reserve on %s: %v", tt.name, err)
		}
		slowest = max(slowest, time.Since(t0))
	}
	return slowest
}

// plantHostile fills the GPU's dir with hostile files (names unique to the
// cycle) and returns how many.
func plantHostile(t *testing.T, dir string, cycle int) int {
	t.Helper()
	newest := map[string]int64{}
	ents, _ := os.ReadDir(dir)
	for _, de := range ents {
		for _, p := range []string{"d.", "s."} {
			if rest, ok := strings.CutPrefix(de.Name(), p); ok {
				rest = strings.TrimSuffix(rest, ".ok")
				if n, err := strconv.ParseInt(rest, 10, 64); err == nil && n > newest[p] {
					newest[p] = n
				}
			}
		}
	}
	c := strconv.Itoa(cycle)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	n := 0
	for _, name := range []string{"l.evil", "t.evil", "s." + strconv.FormatInt(newest["s."]+500, 10), "junkfifo" + c} {
		// The sweep takes a FIFO only once it is 10 s old: a short cycle
		// finds the last cycle's still there.
		os.Remove(path(name))
		must(syscall.Mkfifo(path(name), 0o600))
		n++
	}
	for _, name := range []string{"l.zero", "t.zero", "d." + strconv.FormatInt(newest["d."]+700, 10)} {
		os.Remove(path(name))
		must(os.Symlink("/dev/zero", path(name)))
		n++
	}
	for _, name := range []string{"l.sparse", "t.sparse", "s." + strconv.FormatInt(newest["s."]+600, 10)} {
		must(os.WriteFile(path(name), nil, 0o600))
		must(os.Truncate(path(name), 8<<30))
		n++
	}
	for name, content := range map[string]string{
		"d." + strconv.FormatInt(newest["d."]+1000, 10): "",
		"d." + strconv.FormatInt(newest["d."]+1, 10):    "garbage",
		"s." + strconv.FormatInt(newest["s."]+1000, 10): "",
		"s." + strconv.FormatInt(newest["s."]+1, 10):    "{not json",
	} {
		must(os.WriteFile(path(name), []byte(content), 0o600))
		n++
	}
	old := time.Now().Add(-time.Hour)
	for i := range 10_000 {
		p := path(fmt.Sprintf("junk.%s.%d", c, i))
		must(os.WriteFile(p, []byte("x"), 0o600))
		os.Chtimes(p, old, old)
		n++
	}
	return n
}
