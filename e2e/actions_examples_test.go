package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requestThroughDoor sends one completion through the door and wants 200
// from profile.
func (x *exampleRun) requestThroughDoor(t *testing.T, profile string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Post("http://"+x.door+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":"hello","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-GPUGuard-Profile") != profile {
		t.Fatalf("request: %d from %q, want 200 from %s", resp.StatusCode, resp.Header.Get("X-GPUGuard-Profile"), profile)
	}
}

// sleepAndWake steps the example down to its serving = false profile
// and checks, the moment the instance is asleep, that the child's memory
// is already down (check); then a request wakes it.
func (x *exampleRun) sleepAndWake(t *testing.T, awake string, check func(t *testing.T, pid int)) {
	t.Helper()
	waitFor(t, "the first ready event", 60*time.Second, func() bool { return len(events(x.e, "ready")) == 1 })
	pid := int(x.status(t)["child_pid"].(float64))
	if code, stderr := x.step(t, "down"); code != 0 {
		t.Fatalf("step down: exit %d %s", code, stderr)
	}
	if x.state(t) != "asleep" {
		t.Fatalf("state %v after the step, want asleep", x.state(t))
	}
	check(t, pid)
	x.requestThroughDoor(t, awake)
	if n := len(events(x.e, "action")); n != 2 {
		t.Errorf("%d action events, want 2: %v", n, events(x.e, "action"))
	}
	x.noRestartNoFailure(t)
}

// TestOllamaExampleWaitsForPs: Ollama answers the unload before its
// memory is free (the fake: 500 ms). The shipped example's until polls
// /api/ps until it lists no model, so the step is over, and the instance
// asleep, only once the memory is free. The wake loads the model (an
// empty prompt) and waits for /api/ps to name it.
func TestOllamaExampleWaitsForPs(t *testing.T) {
	t.Parallel()
	fake := fakeServer(t, "ollama_fake.py")
	x := startExample(t, "ollama.toml", [][2]string{{"llama3.1:8b", "m"}},
		[]string{"/usr/bin/python3", fake, "PORT", "1", strconv.Itoa(fakeAwake), strconv.Itoa(fakeAsleep)})
	x.sleepAndWake(t, "loaded", func(t *testing.T, pid int) {
		if m := x.childMemory(t, pid); m != fakeAsleep {
			t.Errorf("asleep while the fake still holds %d bytes, want %d: the step ended before /api/ps said the model was gone", m, fakeAsleep)
		}
	})
	if m := x.childMemory(t, int(x.status(t)["child_pid"].(float64))); m != fakeAwake {
		t.Errorf("the fake holds %d bytes after the wake, want %d", m, fakeAwake)
	}
}

// TestVLLMExampleWaitsForIsSleeping: the shipped vllm-sleep example, its
// sleep and wake each confirmed by GET /is_sleeping as vLLM writes it
// ({"is_sleeping":true}, no spaces).
func TestVLLMExampleWaitsForIsSleeping(t *testing.T) {
	t.Parallel()
	fake := fakeServer(t, "vllm_fake.py")
	x := startExample(t, "vllm-sleep.toml", nil, []string{"/usr/bin/python3", fake, "PORT", "1", strconv.Itoa(fakeAwake), strconv.Itoa(fakeAsleep)})
	x.sleepAndWake(t, "awake", func(t *testing.T, pid int) {
		if m := x.childMemory(t, pid); m != fakeAsleep {
			t.Errorf("the fake holds %d bytes asleep, want %d", m, fakeAsleep)
		}
	})
}
