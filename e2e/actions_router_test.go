package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// exampleRun is gpuguard running one of examples/policies as shipped, on
// the sim GPU (--backend sim, as the examples' headers say), with only its
// door and upstream moved to free ports, the model renamed and the child
// given after "--".
type exampleRun struct {
	*sleepRun
}

// startExample starts examples/policies/<file>, edited by repl (pairs of
// old and new text), around the child argv (nil: the example's own
// command); "PORT" in the text and in argv is replaced by the upstream's
// port.
func startExample(t *testing.T, file string, repl [][2]string, argv []string, env ...string) *exampleRun {
	t.Helper()
	child := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(child)
	if argv != nil {
		argv = slices.Clone(argv)
		for i := range argv {
			argv[i] = strings.ReplaceAll(argv[i], "PORT", port)
		}
	}
	return startExampleIn(t, newEnv(t), child, file, repl, argv, env...)
}

// startExampleIn is startExample in a given env, with the upstream's
// address given (and any use of it already in repl).
func startExampleIn(t *testing.T, e *env, child, file string, repl [][2]string, argv []string, env ...string) *exampleRun {
	t.Helper()
	s := &sleepRun{e: e, door: freeLoopbackAddr(t), child: child, metricsAt: freeLoopbackAddr(t)}
	_, port, _ := net.SplitHostPort(child)
	text := strings.ReplaceAll(exampleText(t, file, repl...), "PORT", port)
	text = setKey(text, "listen", `"`+s.door+`"`)
	text = setKey(text, "upstream", `"http://`+s.child+`"`)
	args := []string{"run", "--backend", "sim", "--policy", e.policy(text), "--metrics-addr", s.metricsAt}
	if argv != nil {
		args = append(append(args, "--"), argv...)
	}
	s.p = e.start(args, env...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gpuguard's stderr:\n%s", s.p.stderr.String())
		}
	})
	s.name = keyValue(text, "name")
	return &exampleRun{sleepRun: s}
}

// setKey sets every top-of-line `key = ...` of a policy's text to value.
func setKey(text, key, value string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if k, _, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == key {
			lines[i] = key + " = " + value
		}
	}
	return strings.Join(lines, "\n")
}

// keyValue is the first `key = "value"` of a policy's text, unquoted.
func keyValue(text, key string) string {
	for _, l := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == key {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return ""
}

// exampleText is examples/policies/<file> with each repl's old text
// replaced by its new.
func exampleText(t *testing.T, file string, repl ...[2]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "policies", file))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, r := range repl {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("%s no longer says %q", file, r[0])
		}
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	return text
}

// waitListening waits until something accepts connections at addr.
func waitListening(t *testing.T, what, addr string) {
	t.Helper()
	waitFor(t, what, 30*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// step runs `gpuguard step NAME dir` and returns its exit code and stderr.
func (x *exampleRun) step(t *testing.T, dir string) (int, string) {
	t.Helper()
	code, _, stderr := x.e.run([]string{"step", x.name, dir, "--runtime-dir", x.e.runDir})
	return code, stderr
}

// state is the instance's state.
func (x *exampleRun) state(t *testing.T) any { return x.status(t)["state"] }

// noRestartNoFailure checks that the whole run launched the child once and
// that no action failed.
func (x *exampleRun) noRestartNoFailure(t *testing.T) {
	t.Helper()
	if n := len(events(x.e, "start")); n != 1 {
		t.Errorf("%d start events, want 1: the router is never restarted", n)
	}
	if f := events(x.e, "action_failed"); len(f) != 0 {
		t.Errorf("action_failed: %v", f)
	}
}

// routerModel is the name the router tests give the model: the load's
// requests ask for "m".
var routerModel = [2]string{"Qwen3-8B-Q4_K_M", "m"}

// startRouter runs the shipped llama-server.toml around the router fake
// with one model, m.gguf, the shipped preset (renamed) when preset is
// true, and autoload off: a request for a model not loaded is an error,
// never a load behind gpuguard's back.
func startRouter(t *testing.T, preset bool, env ...string) *exampleRun {
	t.Helper()
	fake := fakeServer(t, "llama_router_fake.py")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.gguf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	child := []string{"/usr/bin/python3", fake, "--port", "PORT", "--models-dir", dir, "--no-models-autoload"}
	if preset {
		ini := filepath.Join(dir, "models.ini")
		if err := os.WriteFile(ini, []byte(exampleText(t, "llama-server-models.ini", routerModel)), 0o644); err != nil {
			t.Fatal(err)
		}
		child = append(child, "--models-preset", ini)
	}
	return startExample(t, "llama-server.toml", [][2]string{routerModel}, child, env...)
}

// routerStatus is what the router itself (not the door) says of model m.
func (x *exampleRun) routerStatus(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + x.child + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID     string
			Status struct{ Value string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Data {
		if m.ID == "m" {
			return m.Status.Value
		}
	}
	t.Fatalf("the router lists no model m: %+v", list)
	return ""
}

// TestRouterExampleHoldsUntilLoaded: the router answers /health at once,
// and requests for its model while it loads with a 500 "proxy error" or a
// 503. The shipped example's health (/props?model=m&autoload=false)
// opens the door only once the model is loaded, so clients that come
// from the first moment see no error. (With health = "/health" they do:
// the fake reproduces what the router does.)
func TestRouterExampleHoldsUntilLoaded(t *testing.T) {
	t.Parallel()
	x := startRouter(t, true, "FAKE_LOAD_SECONDS=2")
	waitListening(t, "the door", x.door)
	load := startLoad(t, "http://"+x.door, 4)
	waitFor(t, "30 answers", 60*time.Second, func() bool { return load.count() >= 30 })
	if r := load.stop(); len(r.failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %v", len(r.failures), r.ok+len(r.failures), r.failures[0])
	}
	ready := events(x.e, "ready")
	if len(ready) != 1 {
		t.Fatalf("ready events %v, want 1", ready)
	}
	var ev struct {
		AfterSeconds float64 `json:"after_seconds"`
	}
	if err := json.Unmarshal([]byte(ready[0]), &ev); err != nil || ev.AfterSeconds < 2 {
		t.Errorf("ready after %.2fs (%v), want at least the 2 s load", ev.AfterSeconds, err)
	}
	x.noRestartNoFailure(t)

	t.Run("health on /health fails clients", func(t *testing.T) {
		fake := fakeServer(t, "llama_router_fake.py")
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "m.gguf"), nil, 0o644)
		ini := filepath.Join(dir, "models.ini")
		os.WriteFile(ini, []byte("[m]\nload-on-startup = true\n"), 0o644)
		e := newEnv(t)
		door, child := freeLoopbackAddr(t), freeLoopbackAddr(t)
		text := strings.ReplaceAll(exampleText(t, "llama-server.toml", routerModel), "/props?model=m&autoload=false\"\n", "/health\"\n")
		text = setKey(setKey(text, "listen", `"`+door+`"`), "upstream", `"http://`+child+`"`)
		_, port, _ := net.SplitHostPort(child)
		e.start([]string{"run", "--backend", "sim", "--policy", e.policy(text), "--",
			"/usr/bin/python3", fake, "--port", port, "--models-dir", dir, "--models-preset", ini, "--no-models-autoload"}, "FAKE_LOAD_SECONDS=2")
		waitListening(t, "the door", door)
		load := startLoad(t, "http://"+door, 4)
		waitFor(t, "30 answers", 60*time.Second, func() bool { return load.count() >= 30 })
		if r := load.stop(); len(r.failures) == 0 {
			t.Errorf("no request failed with health = /health: the fake no longer answers as the router does")
		}
	})
}

// TestRouterUnloadBeforeLoad: a step into "unloaded" before the model was
// ever loaded (no preset: nothing loads it at start) meets the router's
// 400 "model is not running", which the example accepts; the instance
// sleeps with the router still running. A request then wakes it: the
// load, its until, and the answer.
func TestRouterUnloadBeforeLoad(t *testing.T) {
	t.Parallel()
	x := startRouter(t, false)
	waitListening(t, "the router", x.child)
	if code, stderr := x.step(t, "down"); code != 0 {
		t.Fatalf("step down: exit %d %s", code, stderr)
	}
	waitFor(t, "state asleep", 30*time.Second, func() bool { return x.state(t) == "asleep" })
	acts := events(x.e, "action")
	if len(acts) != 1 || !strings.Contains(acts[0], `"status":400`) || !strings.Contains(acts[0], `"/models/unload"`) {
		t.Fatalf("action events %v, want the unload answered 400", acts)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Post("http://"+x.door+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-GPUGuard-Profile") != "loaded" {
		t.Fatalf("request after the unload: %d from %q, want 200 from loaded", resp.StatusCode, resp.Header.Get("X-GPUGuard-Profile"))
	}
	if s := x.routerStatus(t); s != "loaded" {
		t.Errorf("the router says %q, want loaded", s)
	}
	x.noRestartNoFailure(t)
}

// TestRouterLoadOfLoadedModel: the model is loaded behind gpuguard's back
// while the instance sleeps (a client of the router's own port). The wake's
// load meets 400 "model is already running", which the example accepts,
// and its until sees /props answer 200: the router keeps running and the
// request is answered.
func TestRouterLoadOfLoadedModel(t *testing.T) {
	t.Parallel()
	x := startRouter(t, true)
	waitFor(t, "the first ready event", 30*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	if code, stderr := x.step(t, "down"); code != 0 {
		t.Fatalf("step down: exit %d %s", code, stderr)
	}
	waitFor(t, "state asleep", 30*time.Second, func() bool { return x.state(t) == "asleep" })
	if s := x.routerStatus(t); s != "unloaded" {
		t.Fatalf("after the step the router says %q, want unloaded: until waited for the model's process to exit", s)
	}
	resp, err := http.Post("http://"+x.child+"/models/load", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the router to load m", 30*time.Second, func() bool { return x.routerStatus(t) == "loaded" })
	resp, err = (&http.Client{Timeout: 60 * time.Second}).Post("http://"+x.door+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("request through the door: %d, want 200", resp.StatusCode)
	}
	loads := 0
	for _, ev := range events(x.e, "action") {
		if strings.Contains(ev, `"/models/load"`) && strings.Contains(ev, `"status":400`) {
			loads++
		}
	}
	if loads != 1 {
		t.Errorf("action events %v, want one load answered 400", events(x.e, "action"))
	}
	x.noRestartNoFailure(t)
}

// TestRouterStepDownAndUpUnderLoad: the router answers an unload while the
// model's process still runs (here for 500 ms). A step down and a step
// up right after it, under client load: the unload's until waits for the
// process to exit, so the load that follows loads the model again rather
// than meeting "already running" and opening the door on a model about
// to leave. No request fails, and the router ends with m loaded.
func TestRouterStepDownAndUpUnderLoad(t *testing.T) {
	t.Parallel()
	x := startRouter(t, true, "FAKE_UNLOAD_LAG=0.5")
	waitFor(t, "the first ready event", 30*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	load := startLoad(t, "http://"+x.door, 4)
	waitFor(t, "answered requests", 30*time.Second, func() bool { return load.count() >= 20 })
	if code, stderr := x.step(t, "down"); code != 0 {
		t.Fatalf("step down: exit %d %s", code, stderr)
	}
	// The held requests wake the instance at once (reason request), or
	// this step up does.
	x.step(t, "up")
	waitFor(t, "the wake", 30*time.Second, func() bool { return len(events(x.e, "stepup")) == 1 && x.state(t) == "running" })
	target := load.count() + 40
	waitFor(t, "40 answers after the wake", 60*time.Second, func() bool { return load.count() >= target })
	if r := load.stop(); len(r.failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %v", len(r.failures), r.ok+len(r.failures), r.failures[0])
	}
	if s := x.routerStatus(t); s != "loaded" {
		t.Errorf("the router says %q, want loaded", s)
	}
	x.noRestartNoFailure(t)
}
