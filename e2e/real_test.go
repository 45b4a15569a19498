package e2e

import (
	"encoding/json"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The opt-in suite against real servers: the shipped examples, adapted
// only in paths, ports and the model's name, around a real llama-server
// (one model, and router mode) and a real Ollama, on the sim GPU. Each test
// skips, naming the variables it needs, unless real_helpers_test.go's
// environment variables are set. Run it with
//
//	GPUGUARD_REAL_LLAMA_SERVER=/tmp/real/bin/llama-server \
//	GPUGUARD_REAL_OLLAMA=/tmp/real/bin/ollama \
//	GPUGUARD_REAL_GGUF_DIR=/tmp/real/models \
//	go test -run 'TestReal' -v ./e2e
//
// docs/serving.md ("Tried against real servers") records what passed, and against which
// versions.

const completion = `{"model":"m","prompt":"hello","max_tokens":8}`

// TestRealSingleStepsFailNoRequest: llama-server with -m, under client
// load, through its start and two restart steps (live = false): no
// request fails, and each step is a launch.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealSingleStepsFailNoRequest(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealSingle(t, r, r.small)
	waitListening(t, "the door", x.door)
	load := startLoad(t, "http://"+x.door, 4)
	waitFor(t, "answers", 120*time.Second, func() bool { return load.count() >= 20 })
	for i := 1; i <= 2; i++ {
		if code, stderr := x.step(t, "down"); code != 0 {
			t.Fatalf("step down %d: exit %d %s", i, code, stderr)
		}
		target := load.count() + 20
		waitFor(t, "answers after the step", 120*time.Second, func() bool { return load.count() >= target })
	}
	r2 := load.stop()
	t.Logf("%d requests answered through a start and two restart steps, %d failed", r2.ok, len(r2.failures))
	if len(r2.failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %v", len(r2.failures), r2.ok+len(r2.failures), r2.failures[0])
	}
	if n := len(events(x.e, "start")); n != 3 {
		t.Errorf("%d start events, want 3 (a start and two restarts)", n)
	}
	x.stopGPUGuard(t)
}

// TestRealSSETokenByToken: a streamed completion reaches the client
// through the door event by event, as llama-server sends them.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealSSETokenByToken(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealSingle(t, r, r.large)
	waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	code, evs, err := stream(t, "http://"+x.door+"/v1/completions", `{"model":"m","prompt":"hello","max_tokens":40,"stream":true}`)
	if err != nil || code != 200 {
		t.Fatalf("stream: %d %v", code, err)
	}
	data, arrivals := 0, map[time.Time]bool{}
	for _, ev := range evs {
		if strings.HasPrefix(ev.line, "data: {") {
			data++
			arrivals[ev.at] = true
		}
	}
	t.Logf("%d data events over %s, at %d distinct times", data, evs[len(evs)-1].at.Sub(evs[0].at), len(arrivals))
	if data < 32 || len(arrivals) < data/2 {
		t.Errorf("%d data events at %d distinct times: want at least 32, most of them apart", data, len(arrivals))
	}
	x.stopGPUGuard(t)
}

// TestRealKillMidRequestRetried: llama-server killed with SIGKILL while it
// answers a request that may be repeated (an Idempotency-Key): gpuguard
// restarts it and the door sends the request again; the client gets 200.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealKillMidRequestRetried(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealSingle(t, r, r.large)
	waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	pid := int(x.status(t)["child_pid"].(float64))
	type answer struct {
		code int
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		code, _, err := stream(t, "http://"+x.door+"/v1/completions", `{"model":"m","prompt":"hello","max_tokens":200}`, "Idempotency-Key", "k-1")
		done <- answer{code, err}
	}()
	// The door has handed the request to the child: it is mid-request
	// (200 tokens take about three seconds on the slow model, polling takes
	// milliseconds).
	waitFor(t, "the request in flight", 30*time.Second, func() bool { return x.status(t)["in_flight"] == 1.0 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.code != 200 {
		t.Errorf("the request across the kill: %d %v, want 200", a.code, a.err)
	}
	if n := len(events(x.e, "start")); n != 2 {
		t.Errorf("%d start events, want 2 (the restart after the kill)", n)
	}
	x.stopGPUGuard(t)
}

// TestRealMissingModelGivesUp: llama-server with a model file that does
// not exist exits at once, each time: gpuguard gives up, exit 1.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealMissingModelGivesUp(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealSingle(t, r, "/nonexistent/model.gguf",
		[2]string{`stop_timeout = "30s"`, "stop_timeout = \"30s\"\nbackoff = \"100ms\"\nmax_restarts = 2"})
	if code := x.p.wait(); code != 1 {
		t.Errorf("gpuguard exit %d, want 1 (gave up)", code)
	}
}

// TestRealMissingCommand: a llama-server path that does not exist exits
// 127.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealMissingCommand(t *testing.T) {
	r := needReal(t, envLlamaServer)
	r.llama = "/nonexistent/llama-server"
	x := startRealSingle(t, r, r.small)
	if code := x.p.wait(); code != 127 {
		t.Errorf("gpuguard exit %d, want 127", code)
	}
}

// TestRealRouterHoldsUntilLoaded: the shipped router example opens the
// door once the model is loaded: clients from the first moment get no
// error (the router's /health says 200 at once; its 500 "proxy error" or
// 503 while loading never reaches them).
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealRouterHoldsUntilLoaded(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealRouter(t, r, r.small, true)
	waitListening(t, "the door", x.door)
	load := startLoad(t, "http://"+x.door, 4)
	waitFor(t, "answers", 120*time.Second, func() bool { return load.count() >= 30 })
	if res := load.stop(); len(res.failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %v", len(res.failures), res.ok+len(res.failures), res.failures[0])
	}
	x.noRestartNoFailure(t)
	x.stopGPUGuard(t)
}

// TestRealRouterUnloadLoad: through the router's own API, under client
// load: an unload and a load at once after it (the unload answers while
// the model's process runs; its until waits), an unload before any load
// (400 accepted), a load of a model loaded behind gpuguard's back (400
// accepted). The router is never restarted, no action fails, no request
// fails.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealRouterUnloadLoad(t *testing.T) {
	r := needReal(t, envLlamaServer)
	t.Run("down and up under load", func(t *testing.T) {
		x := startRealRouter(t, r, r.small, true)
		waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
		load := startLoad(t, "http://"+x.door, 4)
		waitFor(t, "answers", 60*time.Second, func() bool { return load.count() >= 20 })
		for i := 0; i < 3; i++ {
			if code, stderr := x.step(t, "down"); code != 0 {
				t.Fatalf("step down: exit %d %s", code, stderr)
			}
			x.step(t, "up") // or a held request wakes it first
			waitFor(t, "the wake", 60*time.Second, func() bool { return x.state(t) == "running" })
			target := load.count() + 20
			waitFor(t, "answers after the wake", 60*time.Second, func() bool { return load.count() >= target })
		}
		if res := load.stop(); len(res.failures) > 0 {
			t.Errorf("%d of %d requests failed, first: %v", len(res.failures), res.ok+len(res.failures), res.failures[0])
		}
		if s := x.routerStatus(t); s != "loaded" {
			t.Errorf("the router says %q, want loaded", s)
		}
		x.noRestartNoFailure(t)
		x.stopGPUGuard(t)
	})
	t.Run("unload before any load", func(t *testing.T) {
		x := startRealRouter(t, r, r.small, false)
		waitFor(t, "the router", 60*time.Second, func() bool { return listening(x.child) })
		if code, stderr := x.step(t, "down"); code != 0 {
			t.Fatalf("step down: exit %d %s", code, stderr)
		}
		waitFor(t, "asleep", 60*time.Second, func() bool { return x.state(t) == "asleep" })
		if code, body := post(t, "http://"+x.door+"/v1/completions", completion, 120*time.Second); code != 200 {
			t.Errorf("request after the unload: %d %s", code, body)
		}
		x.noRestartNoFailure(t)
		x.stopGPUGuard(t)
	})
	t.Run("load of a loaded model", func(t *testing.T) {
		x := startRealRouter(t, r, r.small, true)
		waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
		if code, stderr := x.step(t, "down"); code != 0 {
			t.Fatalf("step down: exit %d %s", code, stderr)
		}
		if s := x.routerStatus(t); s != "unloaded" {
			t.Errorf("after the step the router says %q, want unloaded", s)
		}
		post(t, "http://"+x.child+"/models/load", `{"model":"m"}`, 30*time.Second)
		waitFor(t, "the router to load m", 60*time.Second, func() bool { return x.routerStatus(t) == "loaded" })
		if code, body := post(t, "http://"+x.door+"/v1/completions", completion, 120*time.Second); code != 200 {
			t.Errorf("request after the load: %d %s", code, body)
		}
		x.noRestartNoFailure(t)
		x.stopGPUGuard(t)
	})
}

// TestRealOllama: Ollama behind the shipped example: unload (until
// /api/ps lists none), a wake by request (the load, until /api/ps names
// it), a token stream arriving line by line, and sleep when idle.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealOllama(t *testing.T) {
	r := needReal(t, envOllama)
	x := startRealOllama(t, r, r.small, [2]string{`idle     = "5m"`, `idle     = "4s"`})
	if code, body := post(t, "http://"+x.door+"/api/generate", `{"model":"m","prompt":"hello","stream":false,"options":{"num_predict":8}}`, 120*time.Second); code != 200 {
		t.Fatalf("generate: %d %s", code, body)
	}
	if code, stderr := x.step(t, "down"); code != 0 {
		t.Fatalf("step down: exit %d %s", code, stderr)
	}
	if ps := get(t, "http://"+x.child+"/api/ps"); !strings.Contains(ps, `"models":[]`) {
		t.Errorf("asleep while Ollama's /api/ps says %s", ps)
	}
	code, evs, err := stream(t, "http://"+x.door+"/api/generate", `{"model":"m","prompt":"hello","options":{"num_predict":48}}`)
	if err != nil || code != 200 {
		t.Fatalf("stream after the unload: %d %v", code, err)
	}
	arrivals := map[time.Time]bool{}
	for _, ev := range evs {
		arrivals[ev.at] = true
	}
	t.Logf("the wake's stream: %d lines at %d distinct times", len(evs), len(arrivals))
	if len(evs) < 24 || len(arrivals) < len(evs)/2 {
		t.Errorf("%d lines at %d distinct times: want a line per token, most apart", len(evs), len(arrivals))
	}
	if ups := events(x.e, "stepup"); len(ups) != 1 || !strings.Contains(ups[0], `"reason":"request"`) {
		t.Errorf("stepup events %v, want one by request", ups)
	}
	waitFor(t, "the idle sleep", 60*time.Second, func() bool {
		for _, ev := range events(x.e, "stepdown") {
			if strings.Contains(ev, `"reason":"idle"`) {
				return x.state(t) == "asleep"
			}
		}
		return false
	})
	x.noRestartNoFailure(t)
	x.stopGPUGuard(t)
}

// TestRealHeldDuringStepDown (CONTRACT "Wake on request"): a request that
// arrives while a step into serving = false is under way (the door
// draining for the unload) wakes the instance as soon as that step is
// done, and is answered well under hold. Depends on issue 41 item 2.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealHeldDuringStepDown(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealRouter(t, r, r.large, true, [2]string{`idle     = "15m"`, "idle     = \"15m\"\nhold     = \"60s\""})
	waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // in flight: the step's drain waits for it
		defer wg.Done()
		stream(t, "http://"+x.door+"/v1/completions", `{"model":"m","prompt":"hello","max_tokens":20,"stream":true}`)
	}()
	time.Sleep(500 * time.Millisecond) // the stream is under way
	stepped := make(chan struct{})
	go func() {
		x.step(t, "down")
		close(stepped)
	}()
	waitFor(t, "the step under way", 30*time.Second, func() bool { return x.state(t) == "stepping" })
	start := time.Now()
	code, body := post(t, "http://"+x.door+"/v1/completions", completion, 90*time.Second)
	took := time.Since(start)
	<-stepped
	wg.Wait()
	t.Logf("the request held during the step down: %d after %s", code, took.Round(time.Millisecond))
	if code != 200 || took > 20*time.Second {
		t.Errorf("held during the step down: %d after %s (%s), want 200 well under hold (60s)", code, took, body)
	}
	x.stopGPUGuard(t)
}

// TestRealLongStreamNotCutByIdle (CONTRACT "Sleep when idle"): idle counts
// from the end of the last answer, never while a request is in flight: a
// stream that lasts longer than idle is neither cut nor drained by an
// idle step, and the idle sleep comes idle after its end. Depends on
// issue 41 item 3.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealLongStreamNotCutByIdle(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealSingle(t, r, r.large, [2]string{`idle     = "15m"`, `idle     = "3s"`})
	waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	start := time.Now()
	code, evs, err := stream(t, "http://"+x.door+"/v1/completions", `{"model":"m","prompt":"hello","max_tokens":500,"stream":true}`) // about 8 s on the slow model
	end := time.Now()
	done := len(evs) > 0 && evs[len(evs)-1].line == "data: [DONE]"
	t.Logf("a %s stream with idle = 3s: status %d, %d lines, whole %v, err %v", end.Sub(start).Round(time.Millisecond), code, len(evs), done, err)
	// A stream shorter than twice idle proves nothing: no idle step could
	// have fallen inside it. The models of docs/serving.md's run give 22 s.
	if end.Sub(start) < 6*time.Second {
		t.Errorf("the stream lasted only %s: the check needs one longer than twice idle (6s); give %s a larger or slower model", end.Sub(start), envGGUFDir)
	}
	if code != 200 || err != nil || !done {
		t.Errorf("the stream was cut: status %d, err %v, ended with [DONE] %v", code, err, done)
	}
	var idleAt time.Time
	waitFor(t, "the idle sleep", 60*time.Second, func() bool {
		for _, ev := range events(x.e, "stepdown") {
			var s struct {
				Time   time.Time
				Reason string
			}
			if json.Unmarshal([]byte(ev), &s) == nil && s.Reason == "idle" {
				idleAt = s.Time
				return x.state(t) == "asleep"
			}
		}
		return false
	})
	if idleAt.Before(end.Add(3*time.Second - 200*time.Millisecond)) {
		t.Errorf("the idle step came %s after the stream began and %s before its end: idle must count from the end of the last answer",
			idleAt.Sub(start).Round(time.Millisecond), end.Sub(idleAt).Round(time.Millisecond))
	}
	x.stopGPUGuard(t)
}

// TestRealLaunchReasons (CONTRACT "Exit codes and reasons"): every
// launch's stderr line names its real reason: a restart by `step` says
// step (not watermark), a start after a sleep says request. Depends on
// issue 41 item 4.
//
// Serial: a real model server loads and answers on every CPU (the opt-in
// suite); side by side, the servers would stretch each other past their
// bounds.
func TestRealLaunchReasons(t *testing.T) {
	r := needReal(t, envLlamaServer)
	x := startRealSingle(t, r, r.small)
	waitFor(t, "the first ready event", 120*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	for range 3 { // full -> short-context -> partly-on-cpu -> off (stopped)
		if code, stderr := x.step(t, "down"); code != 0 {
			t.Fatalf("step down: exit %d %s", code, stderr)
		}
	}
	if code, body := post(t, "http://"+x.door+"/v1/completions", completion, 120*time.Second); code != 200 {
		t.Fatalf("the waking request: %d %s", code, body)
	}
	lines := launchLines(x)
	t.Logf("launch lines:\n%s", strings.Join(lines, "\n"))
	want := []string{"fit for the start", "step", "step", "request"}
	if len(lines) != len(want) {
		t.Fatalf("%d launch lines, want %d", len(lines), len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || strings.Contains(lines[i], "after watermark") || strings.Contains(lines[i], "after none") {
			t.Errorf("launch %d: %q, want it to name %s", i, lines[i], w)
		}
	}
	x.stopGPUGuard(t)
}
