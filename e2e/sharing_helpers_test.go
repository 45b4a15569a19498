package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	gjournal "github.com/gpuguard/gpuguard/internal/journal"
)

const mib = 1 << 20

// simTotal is the simulated GPU's memory (--sim-memory's default) and
// simHigh its high watermark at 0.90, in bytes.
const (
	simTotal = 16 << 30
	simHigh  = simTotal * 9 / 10
)

// tenantChild is the tenants' child. It keeps its sim usage at the
// profile's USE (written again after every live change, on SIGUSR1) and
// prints "level NAME L" each time. With $VICTIM set to a signal name it
// sends that signal to its gpuguard on its first step: the instance is
// killed or stopped in the middle of the decision it is executing. Its
// sleeps do not hold stdout, and end by themselves, in case its gpuguard
// is killed and cannot clean up its process group.
//
// A step's grace is all the time the child has to shed its memory before
// its gpuguard may step it again, so w reads the state file with shell
// builtins: the one process it starts is mv (the sim's atomic rename).
// Two sed processes more made a loaded machine miss the grace (embed
// stepped twice in one round of TestTenantsStepInPriorityOrder).
const tenantChild = `
d="$GPUGUARD_SIM_DIR/0"
w() {
  IFS= read -r st < "$GPUGUARD_STATE"
  u=${st#*\"USE\":\"}; u=${u%%\"*}
  l=${st#*\"level\":}; l=${l%%,*}
  printf '%s' "$u" > "$d/.$$" && mv "$d/.$$" "$d/$$"
  echo "level $GPUGUARD_NAME $l"
}
stepped() {
  w
  if [ -n "$VICTIM" ]; then v=$VICTIM; VICTIM=; kill -$v $PPID; fi
}
trap stepped USR1
w
while :; do sleep 5 >/dev/null 2>&1 & s=$!; wait $s; kill $s 2>/dev/null; done
`

// tn is one tenant: a running gpuguard sharing the sandbox's sim GPU.
type tn struct {
	*proc
	name     string
	stateDir string
	level    int
	levels   int
	use      func(level int) uint64
}

// tenantPolicy is a ladder of n live profiles whose USE is use(level),
// with the shared test timings; extra is appended (more keys).
func tenantPolicy(n int, use func(int) uint64, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `[watch]
interval = "50ms"
settle = "100ms"
[watermark]
high = 0.90
critical = 0.99
low = 0.10
sustain = "100ms"
grace = "300ms"
%s
[notify]
signal = "SIGUSR1"
`, extra)
	for i := range n {
		fmt.Fprintf(&b, "[[profile]]\nname = \"p%d\"\nlive = true\nenv = { USE = \"%d\" }\n", i, use(i))
	}
	return b.String()
}

// startTenant starts gpuguard as tenant name with priority prio and the
// policy text, running script under /bin/sh.
func (e *env) startTenant(name string, prio int, policy, script string, extraEnv ...string) *proc {
	e.t.Helper()
	pol := e.path(name + ".toml")
	sc := e.path(name + ".sh")
	for p, text := range map[string]string{pol: policy, sc: script} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.start([]string{"\x00raw", "run", "--name", name, "--priority", strconv.Itoa(prio), "--policy", pol,
		"--backend", "sim", "--sim-dir", e.path("sim"), "--state-dir", filepath.Join(e.stateDir, name),
		"--runtime-dir", e.runDir, "--", "/bin/sh", sc}, extraEnv...)
}

// tenant starts a tenantChild tenant with a ladder of levels profiles.
func (e *env) tenant(name string, prio, levels int, use func(int) uint64, extraEnv ...string) *tn {
	e.t.Helper()
	p := e.startTenant(name, prio, tenantPolicy(levels, use, ""), tenantChild, extraEnv...)
	return &tn{proc: p, name: name, stateDir: filepath.Join(e.stateDir, name), levels: levels, use: use}
}

// nextLevel waits for the tenant's child to print its next level.
func (t *tn) nextLevel() int {
	t.t.Helper()
	l := t.expect("level " + t.name + " ")
	n, err := strconv.Atoi(strings.TrimPrefix(l, "level "+t.name+" "))
	if err != nil {
		t.t.Fatalf("bad line %q", l)
	}
	return n
}

// quiet fails if the tenant's child printed a level line (a step) that
// has not been read yet.
func (t *tn) quiet(what string) {
	t.t.Helper()
	for {
		select {
		case l, ok := <-t.lines:
			if !ok {
				return
			}
			if strings.HasPrefix(l, "level ") {
				t.t.Fatalf("%s: %s stepped too (%q)", what, t.name, l)
			}
		default:
			return
		}
	}
}

// events reads the tenant's journal, the events named ev.
func (t *tn) events(ev string) []api.Event {
	t.t.Helper()
	evs, _, err := gjournal.Read(filepath.Join(t.stateDir, "events.jsonl"), time.Time{})
	if err != nil {
		t.t.Fatal(err)
	}
	var out []api.Event
	for _, e := range evs {
		if e.Event == ev {
			out = append(out, e)
		}
	}
	return out
}

// setOther sets the simulated usage of "another tenant" (not a gpuguard).
func (e *env) setOther(bytes uint64) {
	e.t.Helper()
	d := filepath.Join(e.path("sim"), "0")
	if err := os.MkdirAll(d, 0o755); err != nil {
		e.t.Fatal(err)
	}
	tmp := filepath.Join(d, ".other")
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(bytes, 10)), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d, "other")); err != nil {
		e.t.Fatal(err)
	}
}

// ask sends one request to an instance's socket, within 5s.
func ask[T any](e *env, name string, req func(*control.Client, context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, filepath.Join(e.runDir, name+".sock"))
	if err != nil {
		var zero T
		return zero, err
	}
	defer c.Close()
	return req(c, ctx)
}

// statusOf asks an instance for its status over its socket.
func (e *env) statusOf(name string) (api.Status, error) {
	return ask(e, name, (*control.Client).Status)
}

// waitRunning waits until every named instance runs its child and has
// finished starting (its status says running, and it says it is no
// longer starting).
func (e *env) waitRunning(names ...string) {
	e.t.Helper()
	for _, n := range names {
		ok := pfEventually(60*time.Second, func() bool {
			st, err := e.statusOf(n)
			if err != nil || st.State != api.StateRunning {
				return false
			}
			info, err := e.tenantInfo(n)
			return err == nil && !info.Starting && len(info.GPUs) > 0
		})
		if !ok {
			e.t.Fatalf("%s is not running within 60s", n)
		}
	}
}

func (e *env) tenantInfo(name string) (api.TenantInfo, error) {
	return ask(e, name, (*control.Client).Tenant)
}
