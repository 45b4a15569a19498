package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestIdleSleepAndWakeOnRequest: with [serve] idle, an instance that has
// had no request for that long steps down to its serving = false profile
// (reason idle) through the server's own API; recover_after, however
// short and however empty the GPU, never wakes it; the next request does
// (reason request, counted in gpuguard_stepups_total), and is answered by
// the same process.
func TestIdleSleepAndWakeOnRequest(t *testing.T) {
	t.Parallel()
	s := startSleepRunEdited(t, "vllm_fake.py", vllmActions("60s"), func(p string) string {
		p = strings.Replace(p, `recover_after = "0s"`, `recover_after = "200ms"`, 1)
		return strings.Replace(p, "retry    = false", "retry    = false\nidle     = \"1s\"", 1)
	}, "VLLM_SERVER_DEV_MODE=1")
	pid := int(s.status(t)["child_pid"].(float64))
	waitFor(t, "the idle sleep", 30*time.Second, func() bool { return s.status(t)["state"] == "asleep" })
	downs := events(s.e, "stepdown")
	if len(downs) != 1 || !strings.Contains(downs[0], `"reason":"idle"`) || !strings.Contains(downs[0], `"to":"asleep"`) {
		t.Fatalf("stepdown events %v, want one to asleep with reason idle", downs)
	}
	if acts := events(s.e, "action"); len(acts) != 1 || !strings.Contains(acts[0], `"path":"/sleep?level=1`) {
		t.Fatalf("action events %v, want the one sleep", acts)
	}
	if m := s.childMemory(t, pid); m != fakeAsleep {
		t.Errorf("the fake holds %d bytes asleep, want %d", m, fakeAsleep)
	}
	if n := pfMetric(t, s.metricsAt, `gpuguard_stepdowns_total{name="sleepy",reason="idle"}`); n != 1 {
		t.Errorf(`gpuguard_stepdowns_total{reason="idle"} = %d, want 1`, n)
	}
	// The GPU is far below low: recover_after (200 ms) would step up any
	// serving profile many times over in 30 samples. Counting samples, not
	// time, makes the wait the same on a slow machine.
	probes := `gpuguard_probe_duration_seconds_count{name="sleepy"}`
	target := pfMetric(t, s.metricsAt, probes) + 30
	waitFor(t, "30 more samples", 60*time.Second, func() bool { return pfMetric(t, s.metricsAt, probes) >= target })
	if st := s.status(t); st["state"] != "asleep" || len(events(s.e, "stepup")) != 0 {
		t.Fatalf("after 30 samples below low: state %v, stepups %v; want asleep and none (recover_after never wakes)",
			st["state"], events(s.e, "stepup"))
	}
	if n := pfMetric(t, s.metricsAt, `gpuguard_stepups_total{name="sleepy",reason="recovered"}`); n != 0 {
		t.Errorf(`gpuguard_stepups_total{reason="recovered"} = %d asleep, want 0`, n)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Get("http://" + s.door + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-GPUGuard-Profile") != "awake" {
		t.Fatalf("request while asleep: %d, profile %q; want 200 from awake", resp.StatusCode, resp.Header.Get("X-GPUGuard-Profile"))
	}
	ups := events(s.e, "stepup")
	if len(ups) != 1 || !strings.Contains(ups[0], `"reason":"request"`) {
		t.Errorf("stepup events %v, want one with reason request", ups)
	}
	if n := pfMetric(t, s.metricsAt, `gpuguard_stepups_total{name="sleepy",reason="request"}`); n != 1 {
		t.Errorf(`gpuguard_stepups_total{reason="request"} = %d after the wake, want 1`, n)
	}
	if got := int(s.status(t)["child_pid"].(float64)); got != pid {
		t.Errorf("child pid %d after the wake, want the same %d: a sleep and a wake restart nothing", got, pid)
	}
	s.p.signal(sigterm)
	if code := s.p.wait(); code != 0 {
		t.Errorf("gpuguard exit %d; stderr:\n%s", code, s.p.stderr.String())
	}
}

// TestWakeWaitsForRoomThen503: a request to a sleeping instance whose
// serving profile does not fit beside a neighbour's memory does not wake
// it (the wake would be an OOM): the request waits, and gets 503 after
// [serve] hold; once the neighbour's memory is gone, the next request
// wakes the instance and is answered. The profile's needs are stated, or
// (without needs) what the server used while it served: 4 GiB either way.
func TestWakeWaitsForRoomThen503(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, needs string }{{"stated", "\nneeds = \"4GiB\""}, {"measured", ""}} {
		t.Run(tt.name, func(t *testing.T) { testWakeWaitsForRoom(t, tt.needs) })
	}
}

func testWakeWaitsForRoom(t *testing.T, needs string) {
	s := startSleepRunEdited(t, "vllm_fake.py", vllmActions("60s"), func(p string) string {
		p = strings.Replace(p, `hold     = "60s"`, `hold     = "2s"`, 1)
		return strings.Replace(p, "name = \"awake\"\nlive = true", "name = \"awake\"\nlive = true"+needs, 1)
	}, "VLLM_SERVER_DEV_MODE=1")
	if code, out, stderr := s.e.run([]string{"step", "sleepy", "down", "--runtime-dir", s.e.runDir}); code != 0 || strings.TrimSpace(out) != "asleep" {
		t.Fatalf("step down: exit %d %q %s", code, out, stderr)
	}
	// 13 GiB of 16: 1.15 GiB left under high, less than awake's 4 GiB.
	s.neighbour(t, 13<<30)
	probes := `gpuguard_probe_duration_seconds_count{name="sleepy"}`
	target := pfMetric(t, s.metricsAt, probes) + 3
	waitFor(t, "samples of the neighbour", 30*time.Second, func() bool { return pfMetric(t, s.metricsAt, probes) >= target })
	c := &http.Client{Timeout: 60 * time.Second}
	began := time.Now()
	resp, err := c.Get("http://" + s.door + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if waited := time.Since(began); resp.StatusCode != 503 || waited < 2*time.Second {
		t.Fatalf("request while asleep and awake does not fit: %d after %s, want 503 after hold (2s)", resp.StatusCode, waited)
	}
	if st := s.status(t); st["state"] != "asleep" || len(events(s.e, "stepup")) != 0 {
		t.Fatalf("state %v, stepups %v: want asleep and none while awake does not fit", st["state"], events(s.e, "stepup"))
	}
	if n := pfMetric(t, s.metricsAt, `gpuguard_serve_rejected_total{name="sleepy",reason="hold"}`); n != 1 {
		t.Errorf(`gpuguard_serve_rejected_total{reason="hold"} = %d, want 1`, n)
	}
	s.neighbour(t, 0)
	resp, err = c.Get("http://" + s.door + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-GPUGuard-Profile") != "awake" {
		t.Fatalf("request once there is room: %d, profile %q; want 200 from awake", resp.StatusCode, resp.Header.Get("X-GPUGuard-Profile"))
	}
	if ups := events(s.e, "stepup"); len(ups) != 1 || !strings.Contains(ups[0], `"reason":"request"`) {
		t.Errorf("stepup events %v, want one with reason request", ups)
	}
	s.p.signal(sigterm)
	if code := s.p.wait(); code != 0 {
		t.Errorf("gpuguard exit %d; stderr:\n%s", code, s.p.stderr.String())
	}
}
