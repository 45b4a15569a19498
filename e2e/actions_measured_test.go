package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// offProfile is a serving = false profile without actions after the
// released one: stepping into it stops the child.
const offProfile = `
[[profile]]
name    = "off"
serving = false
`

// TestReleaseThatFreesNothingLeadsOn: SGLang started without
// --enable-memory-saver answers its release with 200 and frees nothing.
// `grace` (3 s) after the release the GPU is still over high: the
// relieved event says 0 bytes and the next step follows, down to stopping
// the server. With the memory saver the release frees the memory: the
// relieved event says how much, and the server stays released.
func TestReleaseThatFreesNothingLeadsOn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		env      []string
		relieved float64
		profile  string
	}{
		{"without the memory saver", []string{"FAKE_NO_MEMORY_SAVER=1"}, 0, "off"},
		{"with the memory saver", nil, fakeAwake - fakeAsleep, "asleep"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startSleepRunEdited(t, "sglang_fake.py", sglangActions, func(p string) string { return p + offProfile }, tt.env...)
			pid := s.status(t)["child_pid"].(float64)
			s.neighbour(t, 11<<30) // 15 of 16 GiB: over high 0.90
			waitFor(t, "the relieved event", 30*time.Second, func() bool { return len(events(s.e, "relieved")) == 1 })
			var rel struct {
				From, To      string
				RelievedBytes *float64 `json:"relieved_bytes"`
			}
			if err := json.Unmarshal([]byte(events(s.e, "relieved")[0]), &rel); err != nil {
				t.Fatal(err)
			}
			if rel.From != "awake" || rel.To != "asleep" || rel.RelievedBytes == nil || *rel.RelievedBytes != tt.relieved {
				t.Fatalf("relieved event %s, want %v bytes from awake to asleep", events(s.e, "relieved")[0], tt.relieved)
			}
			want := func(st map[string]any) bool {
				if tt.profile == "off" {
					return st["state"] == "asleep" && st["profile"] == "off" && st["child_pid"].(float64) == 0
				}
				return st["state"] == "asleep" && st["profile"] == "asleep" && st["child_pid"].(float64) == pid
			}
			waitFor(t, "the instance in "+tt.profile, 30*time.Second, func() bool { return want(s.status(t)) })
			downs := events(s.e, "stepdown")
			if tt.profile == "off" && (len(downs) != 2 || !strings.Contains(downs[1], `"to":"off"`) || !strings.Contains(downs[1], "relieved 0 B")) {
				t.Errorf("stepdown events %v, want the second to off, relieved 0 B", downs)
			}
			if tt.profile == "asleep" {
				time.Sleep(time.Second) // a wrong next step would come at once
				if downs := events(s.e, "stepdown"); len(downs) != 1 || !want(s.status(t)) {
					t.Errorf("stepdown events %v after a release that relieved the GPU, want one", downs)
				}
			}
			s.p.signal(sigterm)
			s.p.wait()
		})
	}
}

// TestHeldDuringSleepStepWakes: a request that arrives while a step into
// a serving = false profile is under way (vLLM's sleep takes 3 s) is held,
// and wakes the instance as soon as the sleep is done: it is answered 200
// well under hold (60 s), where it used to wait out hold and get 503.
func TestHeldDuringSleepStepWakes(t *testing.T) {
	t.Parallel()
	s := startSleepRun(t, "vllm_fake.py", vllmActions("60s"), "VLLM_SERVER_DEV_MODE=1", "FAKE_SLEEP_DELAY=3")
	stepped := make(chan string, 1)
	go func() {
		code, out, stderr := s.e.run([]string{"step", "sleepy", "down", "--runtime-dir", s.e.runDir})
		stepped <- strings.TrimSpace(out) + " " + strings.TrimSpace(stderr) + " " + map[bool]string{true: "ok", false: "failed"}[code == 0]
	}()
	waitFor(t, "the step into sleep under way", 10*time.Second, func() bool { return s.status(t)["state"] == "stepping" })
	began := time.Now()
	c := &http.Client{Timeout: 70 * time.Second}
	resp, err := c.Get("http://" + s.door + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	took := time.Since(began)
	if resp.StatusCode != 200 || took > 20*time.Second {
		t.Fatalf("the request held during the step: %d after %s, want 200 well under hold (60s)", resp.StatusCode, took)
	}
	if got := <-stepped; got != "asleep  ok" {
		t.Errorf("step down: %q", got)
	}
	ups := events(s.e, "stepup")
	if len(ups) != 1 || !strings.Contains(ups[0], `"reason":"request"`) {
		t.Errorf("stepup events %v, want one for the request", ups)
	}
	s.p.signal(sigterm)
	s.p.wait()
}
