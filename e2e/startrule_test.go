package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTypoGivesUpInSeconds: a command that exits at once (python3 with a
// script that does not exist, the typo a newcomer makes) is given up after
// start_retries (3) launches, in seconds rather than after max_restarts
// backoffs (about 5 minutes), with the child's status and its last
// stderr line. Default policy: nothing but --backend sim.
func TestTypoGivesUpInSeconds(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	e := newEnv(t)
	began := time.Now()
	code, _, stderr := e.run([]string{"run", "--backend", "sim", "--name", "typo", "--", "python3", e.path("serve.py")})
	took := time.Since(began)
	if code != 2 {
		t.Fatalf("exit %d, want python's 2; stderr:\n%s", code, stderr)
	}
	// 1 s + 2 s of backoff and three launches of python; 10 s is the
	// issue's bound, with room for a loaded machine.
	if took > 10*time.Second {
		t.Errorf("gave up after %v, want under 10s", took)
	}
	if n := len(events(e, "start")); n != 3 {
		t.Errorf("%d launches, want start_retries = 3", n)
	}
	wantAll(t, "stderr", stderr,
		"restarting (1 of 10) after backoff 1s; it ran ",
		"under start_secs (5s): 1 of 3 such exits in a row before gpuguard gives up (start_retries)",
		"giving up: the child never started: 3 exits in a row, each before start_secs (5s) and before any ready; the last with status 2 after ",
		// The line as python prints it, after its own path.
		`python3: can't open file '`+e.path("serve.py")+`': [Errno 2] No such file or directory"`,
		`; its last stderr line: "`,
	)
	if g := events(e, "giveup"); len(g) != 1 || !strings.Contains(g[0], "the child never started") || !strings.Contains(g[0], `"status":2`) {
		t.Errorf("giveup events %v", g)
	}
}

// TestOOMAtLoadWalksTheLadder: a child that runs out of memory while it
// loads exits at once too, but that is the ladder's business: each OOM
// restarts one profile lower, and the run ends by max_restarts, not by the
// start rule.
func TestOOMAtLoadWalksTheLadder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(strings.Replace(ladder, "[restart]", "[restart]\nmax_restarts = 4\nstart_retries = 1", 1))
	script := `echo "loading in $GPUGUARD_PROFILE" >&2; echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2; exit 1`
	code, _, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "oomload"}, sh(script)...))
	if code != 1 {
		t.Fatalf("exit %d, want the child's 1; stderr:\n%s", code, stderr)
	}
	var profiles []string
	for _, s := range events(e, "start") {
		for _, p := range []string{"fp16", "int8", "int4"} {
			if strings.Contains(s, `"profile":"`+p+`"`) {
				profiles = append(profiles, p)
			}
		}
	}
	if got := strings.Join(profiles, " "); got != "fp16 int8 int4 int4 int4" {
		t.Errorf("launched in %q, want fp16 int8 int4 int4 int4", got)
	}
	if strings.Contains(stderr, "never started") || !strings.Contains(stderr, "giving up: 4 restarts within 10m0s") {
		t.Errorf("want the max_restarts give-up, not the start rule's:\n%s", stderr)
	}
}

// TestChildThatStartedGetsTheUsualBackoff: a child that ran past
// start_secs, or said it was ready, has started: its crash is restarted
// with the usual backoff, and only start_retries quick exits in a row
// (here 2) give up. Launches alternate: one that runs past start_secs (or
// says ready on the socket), then one that exits at once, so no two quick
// exits are ever in a row and the run ends by max_restarts.
func TestChildThatStartedGetsTheUsualBackoff(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	for _, tc := range []struct{ name, started string }{
		{"ran past start_secs", `sleep 0.8`},
		{"said ready", `python3 -c 'import json,os,socket; s=socket.socket(socket.AF_UNIX); s.connect(os.environ["GPUGUARD_SOCKET"]); s.sendall(b"{\"type\":\"ready\"}\n"); s.recv(100)'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			pol := e.policy(strings.Replace(ladder, "backoff_max = \"20ms\"\n",
				"backoff_max = \"40ms\"\nmax_restarts = 4\nstart_secs = \"500ms\"\nstart_retries = 2\n", 1))
			script := `if [ $(($GPUGUARD_RESTARTS % 2)) = 0 ]; then ` + tc.started + `; fi; echo "failing in launch $GPUGUARD_RESTARTS" >&2; exit 3`
			code, _, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "started"}, sh(script)...))
			if code != 3 {
				t.Fatalf("exit %d, want the child's 3; stderr:\n%s", code, stderr)
			}
			if n := len(events(e, "start")); n != 5 {
				t.Errorf("%d launches, want 5 (max_restarts = 4)", n)
			}
			wantAll(t, "stderr", stderr,
				"restarting (1 of 4) after backoff 10ms\n",
				"restarting (2 of 4) after backoff 20ms; it ran ",
				"1 of 2 such exits in a row",
				"restarting (3 of 4) after backoff 40ms\n",
				"giving up: 4 restarts within 10m0s",
			)
			if strings.Contains(stderr, "never started") {
				t.Errorf("the start rule gave up:\n%s", stderr)
			}
		})
	}
}
