package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ladder is a three-profile policy with fast timers for the tests.
const ladder = `
[watch]
backend = "sim"
interval = "50ms"
[watermark]
sustain = "0s"
grace = "300ms"
[restart]
backoff = "10ms"
backoff_max = "20ms"
stop_timeout = "5s"
release_timeout = "1s"
[[profile]]
name = "fp16"
env = { MAX_BATCH = "32" }
[[profile]]
name = "int8"
live = true
env = { MAX_BATCH = "16" }
[[profile]]
name = "int4"
live = true
env = { MAX_BATCH = "8" }
`

func TestExitCodeIsTheChilds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder + "\n")
	if code, _, _ := e.run(append([]string{"run", "--policy", pol, "--name", "x"}, sh("exit 0")...)); code != 0 {
		t.Fatalf("exit 0: got %d", code)
	}
	pol = e.policy(strings.Replace(ladder, "[restart]", "[restart]\non_crash = false", 1))
	if code, _, _ := e.run(append([]string{"run", "--policy", pol, "--name", "x"}, sh("exit 7")...)); code != 7 {
		t.Fatalf("exit 7: got %d", code)
	}
	if code, _, _ := e.run(append([]string{"run", "--policy", pol, "--name", "x"}, sh("kill -SEGV $$$$")...)); code != 128+int(syscall.SIGSEGV) {
		t.Fatalf("killed by SIGSEGV: got %d, want %d", code, 128+int(syscall.SIGSEGV))
	}
}

// TestOOMLadderKeepsCheckpoint: an OOM traceback restarts one profile
// lower each time, the child's env and ${VAR} arguments follow the
// profile, the checkpoint survives and generations are kept.
func TestOOMLadderKeepsCheckpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	script := `
echo "level=$GPUGUARD_LEVEL profile=$GPUGUARD_PROFILE last=$GPUGUARD_LAST_EXIT restarts=$GPUGUARD_RESTARTS batch=$1 env=$MAX_BATCH levels=$GPUGUARD_LEVELS" >> "$OUT"
if [ "$GPUGUARD_LEVEL" -lt 2 ]; then
  [ -f "$GPUGUARD_CHECKPOINT" ] && cat "$GPUGUARD_CHECKPOINT" >> "$OUT"
  printf 'gen%s' "$GPUGUARD_LEVEL" > "$GPUGUARD_CHECKPOINT"
  echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2
  exit 1
fi
echo "restored=$(cat "$GPUGUARD_CHECKPOINT")" >> "$OUT"
`
	code, _, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "oom"}, sh(script, "${MAX_BATCH}")...))
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	want := "level=0 profile=fp16 last=none restarts=0 batch=32 env=32 levels=3\n" +
		"level=1 profile=int8 last=oom restarts=1 batch=16 env=16 levels=3\n" +
		"gen0" +
		"level=2 profile=int4 last=oom restarts=2 batch=8 env=8 levels=3\n" +
		"restored=gen1\n"
	if got := e.read(e.path("out")); got != want {
		t.Fatalf("child saw:\n%s\nwant:\n%s", got, want)
	}
	ck := filepath.Join(e.stateDir, "checkpoint")
	for name, want := range map[string]string{"": "gen1", ".1": "gen1", ".2": "gen0"} {
		if got := e.read(ck + name); got != want {
			t.Errorf("checkpoint%s = %q, want %q", name, got, want)
		}
	}
	if !strings.Contains(stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n") {
		t.Errorf("the child's stderr was not passed through:\n%s", stderr)
	}
	evs := journal(t, e)
	var restarts []string
	for _, ev := range evs {
		if ev["event"] == "restart" {
			restarts = append(restarts, ev["reason"].(string)+":"+ev["from"].(string)+">"+ev["to"].(string))
		}
	}
	if got := strings.Join(restarts, " "); got != "oom:fp16>int8 oom:int8>int4" {
		t.Errorf("journal restarts %q", got)
	}
}

// journal reads the instance's event journal.
func journal(t *testing.T, e *env) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.read(filepath.Join(e.stateDir, "events.jsonl"))), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		for _, k := range []string{"time", "event", "profile", "level"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("journal line without %q: %s", k, line)
			}
		}
		out = append(out, ev)
	}
	return out
}

// TestLiveStepDown: usage above high makes gpuguard write the state file,
// then signal the child, which reads the new profile.
func TestLiveStepDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	script := `
trap 'cat "$GPUGUARD_STATE" > "$OUT.state"; rm -f "$GPUGUARD_SIM_DIR/0/$$$$"; echo stepped; exit 0' USR1
echo "sim=$GPUGUARD_SIM_DIR"
echo 16000000000 > "$GPUGUARD_SIM_DIR/0/.tmp$$$$" && mv "$GPUGUARD_SIM_DIR/0/.tmp$$$$" "$GPUGUARD_SIM_DIR/0/$$$$"
while :; do sleep 0.02; done
`
	p := e.start(append([]string{"run", "--policy", pol, "--name", "live"}, sh(script)...))
	l := p.expect("sim=")
	if want := "sim=" + filepath.Join(e.stateDir, "sim"); l != want {
		t.Errorf("GPUGUARD_SIM_DIR: %q, want %q", l, want)
	}
	p.expect("stepped")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(e.read(e.path("out.state"))), &st); err != nil {
		t.Fatal(err)
	}
	if st["level"] != 1.0 || st["profile"] != "int8" || st["seq"] != 2.0 ||
		st["env"].(map[string]any)["MAX_BATCH"] != "16" || !strings.Contains(st["reason"].(string), "watermark") {
		t.Fatalf("state file the child read: %v", st)
	}
}

// TestStepIntoNonLiveProfileRestarts: a profile with live = false is
// entered by a graceful restart with GPUGUARD_LAST_EXIT=watermark.
func TestStepIntoNonLiveProfileRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(strings.Replace(ladder, "name = \"int8\"\nlive = true", "name = \"int8\"\nlive = false", 1))
	script := `
echo "start $GPUGUARD_PROFILE $GPUGUARD_LAST_EXIT"
if [ "$GPUGUARD_PROFILE" = int8 ]; then exit 0; fi
trap 'rm -f "$GPUGUARD_SIM_DIR/0/$$$$"; exit 0' TERM
echo 16000000000 > "$GPUGUARD_SIM_DIR/0/$$$$"
while :; do sleep 0.02; done
`
	p := e.start(append([]string{"run", "--policy", pol, "--name", "nl"}, sh(script)...))
	p.expect("start fp16 none")
	p.expect("start int8 watermark")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
}

func TestObserveNeverActs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	script := `
trap 'echo got-usr1' USR1
echo 16000000000 > "$GPUGUARD_SIM_DIR/0/$$$$"
i=0; while [ $i -lt 40 ]; do sleep 0.02; i=$((i+1)); done
echo "still $GPUGUARD_PROFILE"
`
	code, out, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "obs", "--observe"}, sh(script)...))
	if code != 0 || strings.Contains(out, "got-usr1") || !strings.Contains(out, "still fp16") {
		t.Fatalf("observe: code %d out %q stderr %s", code, out, stderr)
	}
	var observed bool
	for _, ev := range journal(t, e) {
		if ev["event"] == "stepdown" {
			t.Fatalf("observe mode stepped down: %v", ev)
		}
		observed = observed || ev["event"] == "observe"
	}
	if !observed {
		t.Fatal("observe mode did not journal what it would have done")
	}
}

func TestWhenFullExit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(strings.Replace(ladder, "[restart]", "[restart]\nwhen_full = \"exit\"", 1) + `
[[profile]]
name = "tiny"
needs = "4GiB"
`)
	pol2 := strings.ReplaceAll(e.read(pol), "name = \"fp16\"", "name = \"fp16\"\nneeds = \"8GiB\"")
	pol2 = strings.ReplaceAll(pol2, "name = \"int8\"", "name = \"int8\"\nneeds = \"6GiB\"")
	pol2 = strings.ReplaceAll(pol2, "name = \"int4\"", "name = \"int4\"\nneeds = \"5GiB\"")
	os.WriteFile(pol, []byte(pol2), 0o644)
	simDir := filepath.Join(e.stateDir, "sim")
	if code, _, stderr := e.run([]string{"sim", "set", "--dir", simDir, "other-tenant", "12GiB"}); code != 0 {
		t.Fatalf("sim set: %d %s", code, stderr)
	}
	code, out, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "full"}, sh("echo started")...))
	if code != 75 || strings.Contains(out, "started") {
		t.Fatalf("when_full=exit with a full GPU: code %d, out %q, stderr %s", code, out, stderr)
	}
}

// TestProcessScope: with scope = "process" only the child's own processes
// count (here a grandchild's usage), against the quota; another tenant's
// 10 GB on the same GPU does not.
func TestProcessScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(strings.Replace(ladder, "interval = \"50ms\"", "interval = \"50ms\"\nscope = \"process\"\nquota = \"4GiB\"", 1))
	script := `
trap 'echo stepped; kill $W; exit 0' USR1
echo 10000000000 > "$GPUGUARD_SIM_DIR/0/other-tenant"
sh -c 'echo 3900000000 > "$GPUGUARD_SIM_DIR/0/$$$$"; exec sleep 100' &
W=$!
while :; do sleep 0.02; done
`
	p := e.start(append([]string{"run", "--policy", pol, "--name", "ps"}, sh(script)...))
	p.expect("stepped")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	for _, ev := range journal(t, e) {
		if ev["event"] == "stepdown" {
			if w := ev["watermark"].(float64); w < 0.9 || w > 0.92 {
				t.Errorf("watermark %.3f, want 3.9 GB / 4 GiB = 0.908 (the grandchild only)", w)
			}
			return
		}
	}
	t.Fatal("no stepdown in the journal")
}
