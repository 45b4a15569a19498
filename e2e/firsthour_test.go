package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests of issue 27, "a newcomer's first hour": one for each thing a
// new user ran into, each with the real binary and a real child on the
// sim backend.

// fhLadder is three profiles with needs on the default 16 GiB sim GPU,
// whose room under high (0.90) is 14.4 GiB.
const fhLadder = `
[watch]
backend = "sim"
interval = "50ms"
[restart]
backoff = "10ms"
backoff_max = "20ms"
stop_timeout = "5s"
release_timeout = "1s"
[[profile]]
name = "fp16"
needs = "12GiB"
[[profile]]
name = "int8b"
needs = "6GiB"
live = true
[[profile]]
name = "small"
needs = "2GiB"
live = true
`

// fhStatus is the status object of the instance name.
func fhStatus(t *testing.T, e *env, name string) map[string]any {
	t.Helper()
	code, out, stderr := e.run([]string{"status", name, "--json", "--runtime-dir", e.runDir})
	if code != 0 {
		t.Fatalf("status %s: exit %d\n%s", name, code, stderr)
	}
	var r struct {
		Instances []map[string]any `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Instances) != 1 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return r.Instances[0]
}

// fhFits are the journal's fit events, decoded.
func fhFits(t *testing.T, e *env) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range events(e, "fit") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("fit line %q: %v", l, err)
		}
		out = append(out, ev)
	}
	return out
}

// fhTried renders a fit event's tried list as "fp16:false,int8b:true".
func fhTried(ev map[string]any) string {
	var parts []string
	tried, _ := ev["tried"].([]any)
	for _, x := range tried {
		m := x.(map[string]any)
		parts = append(parts, m["profile"].(string)+":"+strconv.FormatBool(m["fits"].(bool)))
	}
	return strings.Join(parts, ",")
}

// TestFirstHourFitSaysWhy (point 1): a start that skips a profile says
// which profiles it tried, their needs and the free memory, on stderr, in
// the journal (fit) and in status; so does a restart that skips rungs.
// The crash restart says "restarting (n of max) after backoff", no
// "start complete: the child exited" follows an exit, and the first stop
// signal says that a second one forces the stop.
func TestFirstHourFitSaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(fhLadder)
	simDir := filepath.Join(e.stateDir, "sim")
	if code, _, stderr := e.run([]string{"sim", "set", "--dir", simDir, "other", "5GiB"}); code != 0 {
		t.Fatalf("sim set: %d %s", code, stderr)
	}
	// In int8b the child takes the other tenant to 9 GiB and crashes: the
	// restart aims at int8b (6 GiB), which no longer fits 5.4 GiB.
	script := `if [ "$GPUGUARD_PROFILE" = int8b ]; then echo 9663676416 > "$GPUGUARD_SIM_DIR/0/.o"; mv "$GPUGUARD_SIM_DIR/0/.o" "$GPUGUARD_SIM_DIR/0/other"; exit 3; fi
trap 'exit 0' TERM INT
echo "up $GPUGUARD_PROFILE"
while :; do sleep 0.05; done`
	p := e.start(append([]string{"run", "--policy", pol, "--name", "fit"}, sh(script)...))
	p.expect("up small")

	// The journal writes behind the loop: wait for the restart's line.
	waitFor(t, "the restart's fit in the journal", 30*time.Second, func() bool { return len(events(e, "fit")) >= 2 })
	fits := fhFits(t, e)
	if len(fits) != 2 {
		t.Fatalf("fit events %v, want the start and the restart", fits)
	}
	first, second := fits[0], fits[1]
	if fhTried(first) != "fp16:false,int8b:true" || first["to"] != "int8b" || first["reason"] != "start" {
		t.Errorf("the start's fit: %v", first)
	}
	if free, _ := first["free_bytes"].(float64); free != 11<<30 {
		t.Errorf("the start's free_bytes %v, want 11 GiB (16 - 5)", first["free_bytes"])
	}
	if fhTried(second) != "int8b:false,small:true" || second["to"] != "small" || second["reason"] != "crash" {
		t.Errorf("the restart's fit: %v", second)
	}
	st := fhStatus(t, e, "fit")
	if fit, _ := st["fit"].(map[string]any); fit == nil || fit["to"] != "small" || fhTried(fit) != "int8b:false,small:true" {
		t.Errorf("status fit = %v, want the restart's", st["fit"])
	}

	p.signal(syscall.SIGINT)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	stderr := p.stderr.String()
	wantAll(t, "stderr", stderr,
		"fit for the start: starting in int8b: fp16 needs 12 GiB, does not fit; int8b needs 6 GiB, fits (GPU 0: 11 GiB free of 16 GiB",
		"fit for the restart after crash: starting in small: int8b needs 6 GiB, does not fit; small needs 2 GiB, fits (GPU 0: 7 GiB free of 16 GiB",
		"the child crashed (status 3): restarting (1 of 10) after backoff 10ms",
		"SIGINT: stopping the child (waiting up to 5s; press Ctrl-C again",
	)
	if strings.Contains(stderr, "start complete: the child exited") {
		t.Errorf("an exit was followed by \"start complete\":\n%s", stderr)
	}
}

// TestFirstHourStepThatDoesNotFit (point 2): `step up` into a restart
// profile that does not fit is refused before anything is stopped, on the
// CLI (exit 1, needs against free) and on the socket (ok:false); the child
// keeps running. Once memory is freed, the same step goes through, and
// the restart's line says it was for the manual step.
func TestFirstHourStepThatDoesNotFit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(fhLadder)
	simDir := filepath.Join(e.stateDir, "sim")
	if code, _, stderr := e.run([]string{"sim", "set", "--dir", simDir, "other", "5GiB"}); code != 0 {
		t.Fatalf("sim set: %d %s", code, stderr)
	}
	script := `trap 'exit 0' TERM
echo 4294967296 > "$GPUGUARD_SIM_DIR/0/$$$$"
echo "up $GPUGUARD_PROFILE $$$$"
while :; do sleep 0.05; done`
	p := e.start(append([]string{"run", "--policy", pol, "--name", "stp"}, sh(script)...))
	up := p.expect("up int8b")
	pid := strings.Fields(up)[2]
	waitFor(t, "the child's own 4 GiB in status", 30*time.Second, func() bool {
		gpus, _ := fhStatus(t, e, "stp")["gpus"].([]any)
		return len(gpus) == 1 && gpus[0].(map[string]any)["used_bytes"].(float64) == 9<<30
	})

	code, out, stderr := e.run([]string{"step", "stp", "up", "--runtime-dir", e.runDir})
	if code != 1 || out != "" || !strings.Contains(stderr, "profile fp16 does not fit: it needs 12 GiB, and GPU 0 has 9.4 GiB free under high 0.90 (5 GiB of 16 GiB used without this child)") {
		t.Fatalf("step up: exit %d, %q, %s", code, out, stderr)
	}
	conn, err := net.Dial("unix", filepath.Join(e.runDir, "stp.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(`{"type":"step","direction":"up"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	var reply struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(conn).Decode(&reply); err != nil || reply.OK || !strings.Contains(reply.Error, "needs 12 GiB") {
		t.Fatalf("socket step: %+v %v", reply, err)
	}
	if st := fhStatus(t, e, "stp"); st["profile"] != "int8b" || strconv.Itoa(int(st["child_pid"].(float64))) != pid || st["restarts"].(float64) != 0 {
		t.Fatalf("a refused step changed the child: %v", st)
	}
	for _, name := range []string{"stepup", "restart"} {
		if evs := events(e, name); len(evs) != 0 {
			t.Fatalf("a refused step journaled %s: %v", name, evs)
		}
	}

	// With the other tenant gone, fp16 fits: the step restarts into it.
	if code, _, stderr := e.run([]string{"sim", "set", "--dir", simDir, "other", "0"}); code != 0 {
		t.Fatalf("sim set: %d %s", code, stderr)
	}
	waitFor(t, "the other tenant gone from status", 30*time.Second, func() bool {
		gpus, _ := fhStatus(t, e, "stp")["gpus"].([]any)
		return len(gpus) == 1 && gpus[0].(map[string]any)["used_bytes"].(float64) == 4<<30
	})
	if code, out, stderr := e.run([]string{"step", "stp", "up", "--runtime-dir", e.runDir}); code != 0 || strings.TrimSpace(out) != "fp16" {
		t.Fatalf("step up with room: exit %d, %q, %s", code, out, stderr)
	}
	p.expect("up fp16")
	p.signal(syscall.SIGTERM)
	p.wait()
	// The restart's line names its real reason, the manual step.
	if want := "fit for the restart after manual step: starting in fp16"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, p.stderr.String())
	}
}

// TestFirstHourNeverFits (point 3): the vLLM example on the default 16 GiB
// sim GPU (its smallest profile needs 36 GiB) exits 75 at once, naming
// both sizes, whatever when_full says; `policy check` warns, and so it
// does for a quota smaller than every needs, with no backend at all.
func TestFirstHourNeverFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	vllm, err := filepath.Abs("../examples/policies/vllm.toml")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	code, out, stderr := e.run([]string{"run", "--policy", vllm, "--backend", "sim", "--", "sleep", "30"})
	if code != 75 || out != "" || !strings.Contains(stderr, "needs 36 GiB, more than GPU 0 holds (16 GiB in all)") {
		t.Fatalf("vllm.toml on 16 GiB: exit %d, %q, %s", code, out, stderr)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("took %s: it waited", took)
	}
	for _, wf := range []string{"lowest", "exit"} {
		pol := e.policy(strings.Replace(fhLadder, "[restart]", "[restart]\nwhen_full = \""+wf+"\"", 1))
		code, out, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "nf", "--sim-memory", "1GiB"}, sh("echo started")...))
		if code != 75 || strings.Contains(out, "started") || !strings.Contains(stderr, "small, needs 2 GiB, more than GPU 0 holds (1 GiB in all)") {
			t.Errorf("when_full = %s: exit %d, %q, %s", wf, code, out, stderr)
		}
	}

	code, _, stderr = e.run([]string{"policy", "check", vllm, "--backend", "sim"})
	if code != 0 || !strings.Contains(stderr, "warning: no profile can ever fit: the smallest profile, small, needs 36 GiB, more than GPU 0 holds (16 GiB in all); run would exit 75") {
		t.Errorf("policy check --backend sim: exit %d, %s", code, stderr)
	}
	if code, _, stderr = e.run([]string{"policy", "check", vllm, "--backend", "sim", "--sim-memory", "80GiB"}); code != 0 || strings.Contains(stderr, "warning") {
		t.Errorf("policy check on 80 GiB: exit %d, %s", code, stderr)
	}
	quota := e.policy(strings.Replace(fhLadder, "backend = \"sim\"", "backend = \"auto\"\nquota = \"1GiB\"", 1))
	if code, _, stderr = e.run([]string{"policy", "check", quota}); code != 0 || !strings.Contains(stderr, "more than the [watch] quota of 1 GiB") {
		t.Errorf("policy check with a small quota: exit %d, %s", code, stderr)
	}
}

// TestFirstHourStartupLine (point 5): the start-up line names the policy
// file (or the built-in defaults), the backend and the watched GPUs.
func TestFirstHourStartupLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, _, stderr := e.run([]string{"run", "--backend", "sim", "--name", "bare", "--", "true"})
	if code != 0 || !strings.Contains(stderr, "gpuguard[bare]: policy built-in defaults (no policy.toml), backend sim (sim dir "+filepath.Join(e.stateDir, "sim")+"), watching GPU 0 (Simulated GPU, 16 GiB)") {
		t.Fatalf("built-in defaults: exit %d\n%s", code, stderr)
	}
	e.policy(strings.Replace(fhLadder, "[watch]", "[watch]\n", 1)) // ./policy.toml, taken silently before
	code, _, stderr = e.run([]string{"run", "--name", "dot", "--sim-devices", "2", "--", "true"})
	if code != 0 || !strings.Contains(stderr, "gpuguard[dot]: policy policy.toml, backend sim (sim dir ") ||
		!strings.Contains(stderr, "watching GPU 0 (Simulated GPU, 16 GiB), GPU 1 (Simulated GPU, 16 GiB)") {
		t.Fatalf("./policy.toml: exit %d\n%s", code, stderr)
	}
}

// TestFirstHourSimSet (point 6): `sim set` finds the sim dir of the one
// running instance even when another name ran before (and left its sim
// dir); --name picks one; --dir and --sim-dir are accepted by both
// `sim set` and `status`.
func TestFirstHourSimSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := e.path("root")
	envs := []string{"GPUGUARD_STATE_DIR=" + root, "GPUGUARD_RUNTIME_DIR=" + e.runDir}
	if code, _, stderr := e.runRaw([]string{"run", "--backend", "sim", "--name", "old", "--", "true"}, envs...); code != 0 {
		t.Fatalf("old: %d %s", code, stderr)
	}
	p := e.start(append([]string{"\x00raw", "run", "--backend", "sim", "--name", "alive", "--interval", "50ms"}, sh("trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done")...), envs...)
	p.expect("up")

	code, out, stderr := e.runRaw([]string{"sim", "set", "other", "5GiB"}, envs...)
	if want := filepath.Join(root, "alive", "sim", "0", "other"); code != 0 || !strings.HasPrefix(out, want+" = ") {
		t.Fatalf("sim set with one running instance: exit %d, %q, %s", code, out, stderr)
	}
	waitFor(t, "alive to see the other tenant", 30*time.Second, func() bool {
		gpus, _ := fhStatus(t, e, "alive")["gpus"].([]any)
		return len(gpus) == 1 && gpus[0].(map[string]any)["used_bytes"].(float64) == 5<<30
	})
	code, out, stderr = e.runRaw([]string{"sim", "set", "--name", "old", "other", "1GiB"}, envs...)
	if want := filepath.Join(root, "old", "sim", "0", "other"); code != 0 || !strings.HasPrefix(out, want+" = ") {
		t.Fatalf("sim set --name old: exit %d, %q, %s", code, out, stderr)
	}
	oldSim := filepath.Join(root, "old", "sim")
	if code, out, stderr = e.runRaw([]string{"sim", "set", "--sim-dir", oldSim, "x", "1GiB"}, envs...); code != 0 || !strings.HasPrefix(out, oldSim) {
		t.Fatalf("sim set --sim-dir: exit %d, %q, %s", code, out, stderr)
	}
	p.signal(syscall.SIGTERM)
	p.wait()

	// Nothing runs now, and two state dirs have a sim dir: the error says
	// what to pass.
	if code, _, stderr = e.runRaw([]string{"sim", "set", "other", "1GiB"}, envs...); code != 64 || !strings.Contains(stderr, "pass --name NAME or --dir DIR") {
		t.Errorf("ambiguous sim set: exit %d, %s", code, stderr)
	}
	for _, flag := range []string{"--dir", "--sim-dir"} {
		gpus := statusGPUs(t, e, []string{"--backend", "sim", flag, oldSim})
		if len(gpus) != 1 || gpus[0]["used_bytes"].(float64) != 2<<30 {
			t.Errorf("status %s: %v", flag, gpus)
		}
	}
}

// TestFirstHourConventions (point 7): --version; --watch with a separate
// duration; a one-line no-GPU warning with the hint first; the socket of
// a killed instance swept by status.
func TestFirstHourConventions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, out, _ := e.run([]string{"--version"})
	if code != 0 || !strings.HasPrefix(out, "gpuguard ") || !strings.Contains(out, "revision") {
		t.Errorf("--version: exit %d, %q", code, out)
	}

	p := e.start([]string{"status", "--watch", "1s", "--json", "--runtime-dir", e.runDir, "--backend", "sim", "--sim-dir", e.path("sim")})
	p.expect(`"instances":[]`)
	p.expect(`"instances":[]`) // a second refresh: it watches, and 1s was no NAME
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Errorf("status --watch 1s: exit %d, %s", code, p.stderr.String())
	}

	noGPU := []string{"GPUGUARD_NVML_LIB=" + e.path("no-libnvidia-ml.so"), "GPUGUARD_SYSFS=" + e.path("nosys")}
	code, _, stderr := e.run([]string{"status", "--runtime-dir", e.runDir}, noGPU...)
	if code != 0 || !strings.HasPrefix(stderr, "gpuguard: warning: use --backend sim for the simulated GPU: no GPU found") ||
		strings.Count(stderr, "\n") != 1 || len(stderr) > 200 {
		t.Errorf("no-GPU status: exit %d, %q", code, stderr)
	}

	k := e.start(append([]string{"run", "--backend", "sim", "--name", "killed"}, sh("echo up; exec sleep 30")...))
	k.expect("up")
	k.signal(syscall.SIGKILL)
	k.wait()
	sock := filepath.Join(e.runDir, "killed.sock")
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("SIGKILL left no socket to sweep: %v", err)
	}
	code, out, stderr = e.run([]string{"status", "--json", "--runtime-dir", e.runDir, "--backend", "sim", "--sim-dir", e.path("sim")})
	if code != 0 || strings.Contains(out, "killed") || !strings.Contains(stderr, `removed the stale socket`) {
		t.Errorf("status after a SIGKILL: exit %d, %s, %s", code, out, stderr)
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("the stale socket is still there")
	}
}

// TestFirstHourCompletion: the completion the shell scripts ask for knows
// the running instances, step's down|up and the backends.
func TestFirstHourCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.start(append([]string{"run", "--backend", "sim", "--name", "llama"}, sh("trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done")...))
	p.expect("up")
	complete := func(args ...string) []string {
		t.Helper()
		code, out, stderr := e.run(append([]string{"__complete"}, args...))
		if code != 0 {
			t.Fatalf("__complete %q: exit %d, %s", args, code, stderr)
		}
		var words []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") {
				words = append(words, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return words
	}
	for _, c := range [][]string{{"step", "--runtime-dir", e.runDir, ""}, {"status", "--runtime-dir", e.runDir, ""}, {"reload", "--runtime-dir", e.runDir, ""}} {
		if got := complete(c...); !slices.Equal(got, []string{"llama"}) {
			t.Errorf("%s NAME: %q, want [llama]", c[0], got)
		}
	}
	if got := complete("step", "llama", ""); !slices.Equal(got, []string{"down", "up"}) {
		t.Errorf("step llama: %q", got)
	}
	for _, c := range []string{"run", "status"} {
		if got := complete(c, "--backend", ""); !slices.Equal(got, []string{"auto", "nvml", "drm", "sim", "npu-smi"}) {
			t.Errorf("%s --backend: %q", c, got)
		}
	}
	code, out, _ := e.run([]string{"completion", "bash"})
	if code != 0 || !strings.Contains(out, "__complete") {
		t.Errorf("completion bash: exit %d", code)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
}

// TestFirstHourSystemdUnit: a `systemctl stop` (SIGTERM) of a server that
// dies of it leaves gpuguard exiting with a status the unit counts as a
// success, and systemd-analyze verify accepts the unit.
func TestFirstHourSystemdUnit(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("../scripts/systemd/gpuguard@.service")
	if err != nil {
		t.Fatal(err)
	}
	var success []string
	for _, l := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(l, "SuccessExitStatus="); ok {
			success = append(success, strings.Fields(v)...)
		}
	}
	e := newEnv(t)
	p := e.start(append([]string{"run", "--backend", "sim", "--name", "unit"}, sh("echo up; exec sleep 30")...))
	p.expect("up")
	p.signal(syscall.SIGTERM)
	code := p.wait()
	if code != 128+int(syscall.SIGTERM) || !slices.Contains(success, strconv.Itoa(code)) {
		t.Errorf("a stopped server left exit %d; the unit's SuccessExitStatus is %q", code, success)
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	inst := e.path("gpuguard@test.service")
	if err := os.WriteFile(inst, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/gpuguard", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", inst).CombinedOutput()
	if err != nil || strings.Contains(string(out), "gpuguard@") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
