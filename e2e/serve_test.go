package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const sigterm = syscall.SIGTERM

// noRetry turns the door's retry off, so that in the tests of planned
// restarts only the drain can keep requests in flight from failing.
const noRetry = "retry = false"

// TestDoorFirstStartAndWatermarkStep: under steady client load, neither
// the first start (2 s of loading) nor a watermark step into a live =
// false profile (a restart with another 2 s of loading) fails a request.
// The ready events say when each child first answered its health check.
func TestDoorFirstStartAndWatermarkStep(t *testing.T) {
	t.Parallel()
	d := startDoorRun(t, noRetry)
	d.waitReady(t, 1)
	d.moreRequests(t, 20)
	// A neighbour pushes the GPU over high: one step down, one restart.
	neighbour := filepath.Join(d.e.stateDir, "sim", "0", "neighbour")
	if err := os.WriteFile(neighbour, []byte(fmt.Sprint(15<<30)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the step down", 30*time.Second, func() bool { return len(events(d.e, "stepdown")) == 1 })
	if err := os.Remove(neighbour); err != nil {
		t.Fatal(err)
	}
	d.waitReady(t, 2)
	d.moreRequests(t, 20)
	r := d.finish(t, 40)
	if r.profiles["fp16"] == 0 || r.profiles["int8"] == 0 {
		t.Errorf("answers by profile %v: want both fp16 (before) and int8 (after the step)", r.profiles)
	}
	for _, l := range events(d.e, "ready") {
		var ev struct {
			After float64 `json:"after_seconds"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.After < 2 {
			t.Errorf("ready event %s: want after_seconds >= the 2 s load", l)
		}
	}
}

// TestDoorStep: `gpuguard step NAME down` into a live = false profile
// fails no request.
func TestDoorStep(t *testing.T) {
	t.Parallel()
	d := startDoorRun(t, noRetry)
	d.waitReady(t, 1)
	d.moreRequests(t, 20)
	code, out, stderr := d.e.run([]string{"step", "door", "down", "--runtime-dir", d.e.runDir})
	if code != 0 || strings.TrimSpace(out) != "int8" {
		t.Fatalf("step: exit %d %q %s", code, out, stderr)
	}
	d.waitReady(t, 2)
	d.moreRequests(t, 20)
	d.finish(t, 40)
}

// TestDoorReloadDropsProfile: a reload whose ladder no longer has the
// running profile restarts the child, and fails no request.
func TestDoorReloadDropsProfile(t *testing.T) {
	t.Parallel()
	d := startDoorRun(t, noRetry)
	d.waitReady(t, 1)
	d.moreRequests(t, 20)
	text := strings.Replace(d.e.read(d.policy), "name = \"fp16\"", "name = \"bf16\"", 1)
	if err := os.WriteFile(d.policy, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := d.e.run([]string{"reload", "door", "--runtime-dir", d.e.runDir})
	if code != 0 {
		t.Fatalf("reload: exit %d %q %s", code, out, stderr)
	}
	d.waitReady(t, 2)
	d.moreRequests(t, 20)
	r := d.finish(t, 40)
	if r.profiles["bf16"] == 0 {
		t.Errorf("answers by profile %v: want bf16 after the reload", r.profiles)
	}
}

// TestDoorOOM: the child dies of an OOM with requests in flight that had
// no answer yet; they are sent again to the restarted child, and no
// request fails. The requests carry an Idempotency-Key: a POST the child
// may have read whole is sent again only with one (TestDoorRetryRule has
// one without).
func TestDoorOOM(t *testing.T) {
	t.Parallel()
	d := startDoorRunLoad(t, "", true)
	d.waitReady(t, 1)
	d.moreRequests(t, 20)
	c := &http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Get("http://" + d.child + "/oom"); err == nil { // it dies without answering
		resp.Body.Close()
	}
	waitFor(t, "the oom event", 30*time.Second, func() bool { return len(events(d.e, "oom")) == 1 })
	d.waitReady(t, 2)
	d.moreRequests(t, 20)
	if n := pfMetric(t, d.metricsAt, `gpuguard_serve_requests_total{code="200",name="door"}`); n < 40 {
		t.Errorf("gpuguard_serve_requests_total{code=200} = %d", n)
	}
	if n := pfMetric(t, d.metricsAt, `gpuguard_serve_retries_total{name="door"}`); n < 1 {
		t.Errorf("gpuguard_serve_retries_total = %d: the requests in flight at the OOM were not retried", n)
	}
	if n := pfMetric(t, d.metricsAt, `gpuguard_child_ready{name="door"}`); n != 1 {
		t.Errorf("gpuguard_child_ready = %d", n)
	}
	r := d.finish(t, 40)
	if r.profiles["int8"] == 0 {
		t.Errorf("answers by profile %v: want int8 after the OOM", r.profiles)
	}
}

// TestDoorConfigErrors: bad [serve] values are configuration errors (78),
// and a listen address in use exits 1 naming it, with nothing started.
func TestDoorConfigErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, bad := range []string{
		"[serve]\nlisten = \"127.0.0.1:1\"\n",
		"[serve]\nlisten = \"127.0.0.1:1\"\nupstream = \"https://x:1\"\n",
		"[serve]\nhealth = \"health\"\n",
	} {
		pol := e.policy(bad)
		code, _, stderr := e.run(append([]string{"run", "--backend", "sim", "--policy", pol}, sh("echo started")...))
		if code != 78 || !strings.Contains(stderr, "serve.") {
			t.Errorf("%q: exit %d, stderr %s; want 78 naming the key", bad, code, stderr)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pol := e.policy(fmt.Sprintf("[serve]\nlisten = %q\nupstream = \"http://127.0.0.1:1\"\n", ln.Addr().String()))
	code, out, stderr := e.run(append([]string{"run", "--backend", "sim", "--policy", pol}, sh("echo started")...))
	if code != 1 || !strings.Contains(stderr, ln.Addr().String()) || strings.Contains(out, "started") {
		t.Errorf("port in use: exit %d, stdout %q, stderr %s; want 1 naming the address, nothing started", code, out, stderr)
	}
}

// TestDoorSystemdReady: with a front door, READY=1 goes to systemd at the
// child's first healthy answer, not at its launch: when it arrives the
// server has loaded (2 s) and the door's status path answers 200.
func TestDoorSystemdReady(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "ggsd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	d := startDoorRun(t, "", "NOTIFY_SOCKET="+sock)
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no READY=1: %v", err)
		}
		if strings.Contains(string(buf[:n]), "READY=1") {
			break
		}
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("READY=1 %s after the start, before the server's 2 s load", took)
	}
	resp, err := http.Get("http://" + d.door + "/gpuguard/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status path %d at READY=1, want 200", resp.StatusCode)
	}
	d.waitReady(t, 1) // the journal writes behind the loop
	d.finish(t, 1)
}
