package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// idle is a child that says it started and then waits to be stopped.
const idle = `trap 'exit 0' TERM INT HUP; echo "up $GPUGUARD_PROFILE"; while :; do sleep 0.02; done`

func TestExitCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := e.path("bad.toml")
	os.WriteFile(bad, []byte("[watermark]\nhigh = 0.99\ncritical = 0.95\n"), 0o644)
	missingLib := "LD_LIBRARY_PATH=" + e.dir
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"invalid policy names file, line and key", append([]string{"run", "--policy", bad}, sh("true")...), 78,
			[]string{"bad.toml:2:", "watermark.high"}},
		{"policy errors win over a missing driver", append([]string{"run", "--policy", bad, "--backend", "nvml"}, sh("true")...), 78, nil},
		{"a named policy that is missing", append([]string{"run", "--policy", e.path("nope.toml")}, sh("true")...), 78, []string{"nope.toml"}},
		{"unknown ${VAR} in the command", append([]string{"run", "--backend", "sim"}, sh("echo", "${NOPE}")...), 78, []string{"NOPE"}},
		{"no NVML library", append([]string{"run", "--backend", "nvml"}, sh("true")...), 69,
			[]string{"libnvidia-ml.so", "--backend sim"}},
		{"unknown flag", []string{"run", "--bogus"}, 64, nil},
		{"no command", []string{"run", "--backend", "sim"}, 64, []string{"no command"}},
		{"bad backend", append([]string{"run", "--backend", "tpu"}, sh("true")...), 64, nil},
		{"unknown profile", append([]string{"run", "--backend", "sim", "--profile", "int3"}, sh("true")...), 64, []string{"int3"}},
		{"policy check of an invalid file", []string{"policy", "check", bad}, 78, []string{"watermark.high"}},
		{"policy check usage", []string{"policy", "check", "a", "b"}, 64, nil},
		{"step usage", []string{"step", "x", "sideways"}, 64, nil},
		{"step with no such instance", []string{"step", "ghost", "down", "--runtime-dir", e.path("run")}, 1, nil},
		{"status of no such instance", []string{"status", "ghost", "--runtime-dir", e.path("run"), "--backend", "sim"}, 1, nil},
	}
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"); err == nil {
		tests = tests[:4]
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := e.run(tt.args, missingLib)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			wantAll(t, "stderr", stderr, tt.stderr...)
		})
	}
	if _, err := os.Stat(e.stateDir); err == nil {
		t.Error("a run that failed before starting created the state dir")
	}
}

func TestPolicyCheckPrintsLadder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, out, stderr := e.run([]string{"policy", "check", e.policy(ladder)})
	if code != 0 || !strings.Contains(out, "fp16") || !strings.Contains(out, "int8") || !strings.Contains(out, "int4") {
		t.Fatalf("policy check: %d\n%s\n%s", code, out, stderr)
	}
}

// TestAlreadyRunning: a second run of the same name exits 1 and leaves
// the state dir alone.
func TestAlreadyRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start(append([]string{"run", "--backend", "sim", "--name", "dup"}, sh(idle)...))
	p.expect("up default")
	other := e.path("other-state")
	code, _, stderr := e.run(append([]string{"run", "--backend", "sim", "--name", "dup",
		"--runtime-dir", e.runDir, "--state-dir", other}, sh("true")...))
	if code != 1 || !strings.Contains(stderr, "already running") {
		t.Fatalf("second instance: exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(other); err == nil {
		t.Error("the second instance touched its state dir")
	}
	p.signal(15)
	if code := p.wait(); code != 0 {
		t.Fatalf("first instance exit %d", code)
	}
	// The name is free again: no stale lock.
	if code, _, stderr := e.run(append([]string{"run", "--backend", "sim", "--name", "dup"}, sh("true")...)); code != 0 {
		t.Fatalf("after the first ended: exit %d\n%s", code, stderr)
	}
}

// TestStatusStepReport drives a live instance with the other commands.
func TestStatusStepReport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	script := `trap 'exit 0' TERM; trap 'echo "notified $(cat "$GPUGUARD_STATE")"' USR1; echo up; while :; do sleep 0.02; done`
	p := e.start(append([]string{"run", "--policy", pol, "--name", "svc"}, sh(script)...))
	p.expect("up")

	code, out, stderr := e.run([]string{"status", "--json", "--runtime-dir", e.runDir})
	if code != 0 {
		t.Fatalf("status: %d %s", code, stderr)
	}
	var st struct {
		Instances []map[string]any `json:"instances"`
		GPUs      []map[string]any `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(st.Instances) != 1 {
		t.Fatalf("instances: %v", st.Instances)
	}
	in := st.Instances[0]
	for _, k := range []string{"name", "pid", "child_pid", "state", "profile", "level", "levels", "watermark",
		"restarts", "uptime_seconds", "child_uptime_seconds", "observe", "gpus", "leases", "tasks", "last_event",
		"in_flight", "idle_seconds", "room_for"} {
		if _, ok := in[k]; !ok {
			t.Errorf("status object lacks %q", k)
		}
	}
	// Without a front door: no request in flight, idle_seconds null; not
	// asleep for a peer: room_for null.
	if in["in_flight"] != 0.0 || in["idle_seconds"] != nil || in["room_for"] != nil {
		t.Errorf("status object without a door: in_flight %v, idle_seconds %v, room_for %v; want 0, null, null",
			in["in_flight"], in["idle_seconds"], in["room_for"])
	}
	if in["name"] != "svc" || in["profile"] != "fp16" || in["levels"] != 3.0 || in["child_pid"] == 0.0 {
		t.Errorf("status object: %v", in)
	}
	if len(st.GPUs) != 1 || st.GPUs[0]["total_bytes"] != float64(16<<30) {
		t.Errorf("gpus: %v", st.GPUs)
	}
	if code, out, _ := e.run([]string{"status", "--runtime-dir", e.runDir}); code != 0 || !strings.Contains(out, "svc") {
		t.Errorf("status table: %d\n%s", code, out)
	}

	code, out, stderr = e.run([]string{"step", "svc", "down", "--runtime-dir", e.runDir})
	if code != 0 || strings.TrimSpace(out) != "int8" {
		t.Fatalf("step down: %d %q %s", code, out, stderr)
	}
	if l := p.expect("notified"); !strings.Contains(l, `"profile":"int8"`) {
		t.Errorf("the child read %s", l)
	}
	e.run([]string{"step", "svc", "down", "--runtime-dir", e.runDir})
	if code, _, stderr := e.run([]string{"step", "svc", "down", "--runtime-dir", e.runDir}); code != 1 {
		t.Errorf("step past the last profile: exit %d %s", code, stderr)
	}
	p.signal(15)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	code, out, stderr = e.run([]string{"report", "svc", "--json", "--state-dir", e.stateDir, "--runtime-dir", e.runDir})
	if code != 0 {
		t.Fatalf("report: %d %s", code, stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report --json: %v\n%s", err, out)
	}
	for _, k := range []string{"stepdowns", "oom_fallbacks", "restarts", "seconds_in_profile", "fallback_rate"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q: %s", k, out)
		}
	}
	if rep["stepdowns"] != 2.0 {
		t.Errorf("stepdowns %v, want 2 (manual)", rep["stepdowns"])
	}
	var manual int
	for _, ev := range journal(t, e) {
		if ev["event"] == "stepdown" && ev["reason"] == "manual" {
			manual++
		}
	}
	if manual != 2 {
		t.Errorf("journal: %d manual step-downs, want 2", manual)
	}
}

// TestSocketOOMReport: a child that says "oom" on the socket and exits 0
// is restarted one profile lower.
func TestSocketOOMReport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	script := `
echo "start $GPUGUARD_PROFILE $GPUGUARD_LAST_EXIT"
[ "$GPUGUARD_LEVEL" = 1 ] && exit 0
python3 -c '
import os, socket
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["GPUGUARD_SOCKET"])
s.sendall(b"not json\n{\"type\":\"oom\",\"detail\":\"allocator\",\"id\":7}\n")
f = s.makefile()
print("bad:", f.readline().strip())
print("oom:", f.readline().strip())
'
exit 0
`
	code, out, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "sock"}, sh(script)...))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	wantAll(t, "output", out, "start fp16 none", `bad: {"ok":false`, `oom: {"ok":true`, `"id":7`, "start int8 oom")
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Below the ephemeral range (freeLoopbackAddr): once ln is closed, no
	// other test's connection can take the port before gpuguard binds it.
	addr := freeLoopbackAddr(t)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// While the port is taken, run refuses to start: 1, no child
	// (TestAddressInUse).
	code, out, stderr := e.run(append([]string{"run", "--backend", "sim", "--name", "m", "--metrics-addr", addr}, sh("echo started")...))
	if code != 1 || strings.Contains(out, "started") {
		t.Fatalf("port in use: exit %d out %q stderr %s", code, out, stderr)
	}
	ln.Close()
	p := e.start(append([]string{"run", "--backend", "sim", "--name", "m", "--metrics-addr", addr}, sh(idle)...))
	p.expect("up")
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{"gpuguard_gpu_memory_used_bytes{", "gpuguard_gpu_memory_total_bytes{", "gpuguard_watermark_ratio{",
		"gpuguard_profile_level{", "gpuguard_child_up{", "gpuguard_stepdowns_total{", "gpuguard_restarts_total{",
		"gpuguard_admission_decisions_total{", "gpuguard_probe_errors_total{", "gpuguard_probe_duration_seconds_bucket{"} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "gpuguard_") && !strings.Contains(line, `name="m"`) {
			t.Errorf("series without the instance label: %s", line)
		}
	}
	p.signal(15)
	p.wait()
}

// TestSystemdNotify: READY=1 once the child runs, STATUS= lines, STOPPING=1;
// the child does not see NOTIFY_SOCKET.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sock := e.path("notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:n])
		}
	}()
	script := `trap 'exit 0' TERM; echo "notify=$${NOTIFY_SOCKET:-unset} wd=$${WATCHDOG_USEC:-unset}"; while :; do sleep 0.02; done`
	p := e.start(append([]string{"run", "--backend", "sim", "--name", "sd"}, sh(script)...),
		"NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=2000000", "WATCHDOG_PID=")
	if l := p.expect("notify="); l != "notify=unset wd=unset" {
		t.Errorf("the child saw %q", l)
	}
	seen := map[string]bool{}
	for !seen["READY=1"] || !seen["STATUS"] || !seen["WATCHDOG=1"] {
		msg := <-got
		for _, line := range strings.Split(msg, "\n") {
			if strings.HasPrefix(line, "STATUS=") {
				seen["STATUS"] = true
				if !strings.Contains(line, "profile") || !strings.Contains(line, "watermark") {
					t.Errorf("STATUS line %q names no profile or watermark", line)
				}
			} else {
				seen[line] = true
			}
		}
	}
	p.signal(15)
	p.wait()
	// gpuguard has exited: whatever it sent is queued in the socket by
	// now. A last datagram of the test's own marks the end of the queue,
	// so the drain does not depend on the reader being scheduled before a
	// short deadline; the long one only ends a hung test.
	end, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := end.Write([]byte("TEST-END")); err != nil {
		t.Fatal(err)
	}
	end.Close()
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	stopping := 0
	for msg := range got {
		if msg == "TEST-END" {
			break
		}
		stopping += strings.Count(msg, "STOPPING=1")
	}
	if stopping != 1 {
		t.Errorf("STOPPING=1 sent %d times, want once", stopping)
	}
}

// TestStderrPassThrough: stderr reaches gpuguard's stderr byte for byte;
// with scan_stderr = false the child writes to gpuguard's stderr itself.
func TestStderrPassThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	payload := strings.Repeat("line with \t tabs and ünïcode\n", 5000) + "no newline at the end"
	os.WriteFile(e.path("payload"), []byte(payload), 0o644)
	_, _, stderr := e.run(append([]string{"run", "--backend", "sim", "--name", "se"}, sh(`cat "$PAYLOAD" >&2`)...),
		"PAYLOAD="+e.path("payload"))
	// gpuguard's own log lines share the stream; take them out.
	stderr = regexp.MustCompile(`gpuguard\[se\]: [^\n]*\n`).ReplaceAllString(stderr, "")
	if stderr != payload {
		t.Fatalf("stderr changed on the way through (%d bytes)", len(stderr))
	}
	pol := e.policy("[watch]\nbackend = \"sim\"\n[oom]\nscan_stderr = false\n")
	code, out, _ := e.run(append([]string{"run", "--policy", pol, "--name", "se2"},
		sh(`readlink /proc/$$$$/fd/2; readlink /proc/$PPID/fd/2`)...))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || lines[0] != lines[1] {
		t.Fatalf("scan_stderr=false: the child's stderr %q is not gpuguard's", lines)
	}
}

// TestStateDirDefault: without --state-dir the instance's dir is
// $GPUGUARD_STATE_DIR/<name>.
func TestStateDirDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := e.path("root")
	code, out, stderr := e.runRaw(append([]string{"run", "--backend", "sim", "--name", "dflt", "--runtime-dir", e.runDir},
		sh(`echo "$GPUGUARD_CHECKPOINT $GPUGUARD_STATE $GPUGUARD_SOCKET"`)...), "GPUGUARD_STATE_DIR="+root)
	want := filepath.Join(root, "dflt", "checkpoint") + " " + filepath.Join(root, "dflt", "state.json") + " " + filepath.Join(e.runDir, "dflt.sock")
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("exit %d: %q, want %q\n%s", code, out, want, stderr)
	}
}

// TestUnusableStateDir: a state dir that cannot be created is a clear
// error, and no child starts.
func TestUnusableStateDir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	file := e.path("a-file")
	os.WriteFile(file, nil, 0o644)
	code, out, stderr := e.runRaw(append([]string{"run", "--backend", "sim", "--name", "sd",
		"--state-dir", filepath.Join(file, "state"), "--runtime-dir", e.runDir}, sh("echo started")...))
	if code != 1 || strings.Contains(out, "started") || !strings.Contains(stderr, "state dir") {
		t.Fatalf("exit %d out %q stderr %s", code, out, stderr)
	}
}
