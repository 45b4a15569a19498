package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// GPU fault events (Xids) on the simulated GPU, end to end: `gpuguard sim
// xid` injects them, the running instance journals and counts them, and a
// child that dies after a critical one is a gpu_fault exit.

// xidChild says "up $GPUGUARD_LAST_EXIT"; its first run waits for $OUT to
// appear and then exits 3 (as a server dies of a lost GPU), later runs
// just wait.
const xidChild = `trap 'exit 0' TERM; echo "up $GPUGUARD_LAST_EXIT"
if [ "$GPUGUARD_LAST_EXIT" = none ]; then
  while [ ! -e "$OUT" ]; do sleep 0.02; done; echo dying; exit 3
fi
while :; do sleep 0.02; done`

func xidPolicy(extra string) string {
	return "[watch]\nbackend = \"sim\"\ninterval = \"50ms\"\n[restart]\nbackoff = \"100ms\"\n" + extra
}

// injectXid runs `gpuguard sim xid` on the instance's sim dir.
func injectXid(t *testing.T, e *env, xid string) {
	t.Helper()
	code, out, stderr := e.run([]string{"sim", "xid", "--dir", filepath.Join(e.stateDir, "sim"), xid})
	if code != 0 || !strings.Contains(out, "Xid "+xid) {
		t.Fatalf("sim xid %s: exit %d\n%s%s", xid, code, out, stderr)
	}
}

// journalEvent is the part of a journal line these tests check.
type journalEvent struct {
	Time     time.Time `json:"time"`
	Event    string    `json:"event"`
	Reason   string    `json:"reason"`
	GPU      string    `json:"gpu"`
	GPUIndex *int      `json:"gpu_index"`
	Xid      int       `json:"xid"`
	Detail   string    `json:"detail"`
}

func decodeEvents(t *testing.T, lines []string) []journalEvent {
	t.Helper()
	var out []journalEvent
	for _, l := range lines {
		var ev journalEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("journal line %q: %v", l, err)
		}
		out = append(out, ev)
	}
	return out
}

// waitFault waits for the gpu_fault event of xid and checks its fields.
func waitFault(t *testing.T, e *env, xid int) journalEvent {
	t.Helper()
	waitFor(t, "gpu_fault event", 30*time.Second, func() bool { return len(events(e, "gpu_fault")) > 0 })
	evs := decodeEvents(t, events(e, "gpu_fault"))
	ev := evs[len(evs)-1]
	if ev.Xid != xid || !strings.HasPrefix(ev.GPU, "GPU-") || ev.GPUIndex == nil || *ev.GPUIndex != 0 || !strings.Contains(ev.Detail, "Xid") {
		t.Fatalf("gpu_fault event %+v: want Xid %d on GPU 0 with its UUID and a detail", ev, xid)
	}
	return ev
}

// TestXidStop: the child dies after Xid 79; with the default
// on_gpu_fault = "stop" gpuguard exits 1 and journals giveup gpu_fault.
func TestXidStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start(append([]string{"run", "--policy", e.policy(xidPolicy("")), "--name", "xs"}, sh(xidChild)...))
	p.expect("up none")
	injectXid(t, e, "79")
	waitFault(t, e, 79)
	os.WriteFile(e.path("out"), nil, 0o644)
	p.expect("dying")
	if code := p.wait(); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, p.stderr.String())
	}
	g := decodeEvents(t, events(e, "giveup"))
	if len(g) != 1 || g[0].Reason != "gpu_fault" {
		t.Errorf("giveup events %+v, want one with reason gpu_fault", g)
	}
	if n := len(events(e, "restart")) + len(events(e, "oom")); n != 0 {
		t.Errorf("%d restart/oom events after a GPU fault", n)
	}
	if !strings.Contains(p.stderr.String(), "Xid 79") {
		t.Errorf("stderr does not name the Xid:\n%s", p.stderr.String())
	}
}

// TestXidRestart: with on_gpu_fault = "restart" the child is restarted in
// the same profile with GPUGUARD_LAST_EXIT=gpu_fault, and not before the
// simulated GPU answers again (1s after the event).
func TestXidRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := freeLoopbackAddr(t)
	pol := e.policy(xidPolicy("on_gpu_fault = \"restart\"\n"))
	p := e.start(append([]string{"run", "--policy", pol, "--name", "xr", "--metrics-addr", addr}, sh(xidChild)...))
	p.expect("up none")
	injected := time.Now()
	injectXid(t, e, "79")
	waitFault(t, e, 79)
	os.WriteFile(e.path("out"), nil, 0o644)
	p.expect("up gpu_fault")
	// The child speaks before the journal's writer has written its start.
	waitFor(t, "the second start event", 30*time.Second, func() bool { return len(events(e, "start")) >= 2 })
	r := decodeEvents(t, events(e, "restart"))
	if len(r) != 1 || r[0].Reason != "gpu_fault" {
		t.Fatalf("restart events %+v, want one with reason gpu_fault", r)
	}
	starts := decodeEvents(t, events(e, "start"))
	if len(starts) != 2 || starts[1].Time.Before(injected.Add(time.Second)) {
		t.Errorf("start events %+v: the restart must wait for the GPU to answer (1s after %s)", starts, injected)
	}
	m := scrape(t, addr)
	wantAll(t, "metrics", m, `gpuguard_gpu_faults_total{gpu="0",name="xr",xid="79"} 1`, `gpuguard_restarts_total{name="xr",reason="gpu_fault"} 1`)
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want the child's 0", code)
	}
}

// TestXidApplication: Xid 13 is journaled and counted, and the child runs
// on untouched.
func TestXidApplication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := freeLoopbackAddr(t)
	child := `trap 'echo "got TERM"; exit 0' TERM; echo up; i=0; while :; do i=$((i+1)); echo "beat $i"; sleep 0.02; done`
	p := e.start(append([]string{"run", "--policy", e.policy(xidPolicy("")), "--name", "xa", "--metrics-addr", addr}, sh(child)...))
	p.expect("up")
	injectXid(t, e, "13")
	waitFault(t, e, 13)
	waitFor(t, "the fault counted", 30*time.Second, func() bool {
		return strings.Contains(scrape(t, addr), `gpuguard_gpu_faults_total{gpu="0",name="xa",xid="13"} 1`)
	})
	p.expect("beat") // still running
	p.signal(syscall.SIGTERM)
	p.expect("got TERM")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if n := len(events(e, "restart")) + len(events(e, "giveup")); n != 0 {
		t.Errorf("%d restart/giveup events after an application Xid", n)
	}
}

// scrape returns the metrics text at addr ("" when it does not answer).
func scrape(t *testing.T, addr string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
