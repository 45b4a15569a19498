package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// doorErr is OpenAI's error shape as a client decodes it.
type doorErr struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

// TestDoorRoutesByModel: two instances behind one `gpuguard door`: each
// request reaches the instance of the model it names, an alias rewritten
// to the server's own name (seen by the child); the listings, the error
// codes, an SSE stream that arrives chunk by chunk, and metrics to which
// 50 unknown models add no series.
func TestDoorRoutesByModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gate := e.path("gate")
	llm := e.startModelInstance("llm", `models = ["qwen2.5-7b-instruct", "qwen"]`, "FAKE_GATE="+gate)
	e.startModelInstance("embed", "")
	d := e.startGPUGuardDoor("--max-body", "64KiB")
	waitFor(t, "both instances routed", 10*time.Second, func() bool { return len(d.modelIDs(t)) == 3 })

	t.Run("routing", func(t *testing.T) {
		for _, tt := range []struct{ path, body, instance, says string }{
			{"/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`, "llm", "llm:qwen2.5-7b-instruct"},
			{"/v1/completions", `{"model":"qwen2.5-7b-instruct","prompt":"hi"}`, "llm", "llm:qwen2.5-7b-instruct"},
			{"/v1/embeddings", `{"model":"embed","input":"hi"}`, "embed", `"model": "embed"`},
			{"/api/chat", `{"model":"qwen","messages":[],"stream":false}`, "llm", "llm:qwen2.5-7b-instruct"},
			{"/api/generate", `{"model":"embed","prompt":"x","stream":false}`, "embed", "embed:embed"},
			{"/api/embed", `{"model":"qwen","input":["a","b"]}`, "llm", `"model": "qwen2.5-7b-instruct"`},
			{"/api/show", `{"name":"qwen"}`, "llm", "llm:qwen2.5-7b-instruct"},
			{"/upstream/embed/some/path?x=1", "", "embed", `"path": "/some/path?x=1"`},
		} {
			a := call(t, "POST", d.url+tt.path, tt.body)
			if a.status != 200 || !strings.Contains(a.body, tt.says) || a.header.Get("X-GPUGuard-Instance") != tt.instance ||
				a.header.Get("X-Fake-Name") != tt.instance || a.header.Get("X-GPUGuard-Profile") == "" {
				t.Errorf("%s %s: %d %v %s; want %s's answer saying %q, through its front door", tt.path, tt.body, a.status, a.header, a.body, tt.instance, tt.says)
			}
		}
	})

	t.Run("listings", func(t *testing.T) {
		if ids := d.modelIDs(t); !slices.Equal(ids, []string{"embed", "qwen", "qwen2.5-7b-instruct"}) {
			t.Errorf("/v1/models ids %q", ids)
		}
		var one struct {
			ID       string `json:"id"`
			GPUGuard struct{ Instance, State, Profile string }
		}
		call(t, "GET", d.url+"/v1/models/qwen", "").json(t, &one)
		if one.ID != "qwen" || one.GPUGuard.Instance != "llm" || one.GPUGuard.State != "ready" || one.GPUGuard.Profile != "default" {
			t.Errorf("/v1/models/qwen: %+v", one)
		}
		var tags, ps struct {
			Models []struct{ Name, Model string }
		}
		call(t, "GET", d.url+"/api/tags", "").json(t, &tags)
		call(t, "GET", d.url+"/api/ps", "").json(t, &ps)
		if len(tags.Models) != 3 || tags.Models[1].Name != "qwen" || tags.Models[1].Model != "qwen" || len(ps.Models) != 3 {
			t.Errorf("/api/tags %+v /api/ps %+v", tags, ps)
		}
		var v struct{ Version string }
		call(t, "GET", d.url+"/api/version", "").json(t, &v)
		_, out, _ := e.run([]string{"\x00raw", "version", "--json"})
		var own struct{ Version string }
		if err := json.Unmarshal([]byte(out), &own); err != nil || v.Version == "" || v.Version != own.Version {
			t.Errorf("/api/version %q, gpuguard version says %s", v.Version, out)
		}
		var door struct {
			Models []struct {
				Name      string
				Instances []map[string]any
			}
		}
		call(t, "GET", d.url+"/gpuguard/v1/models", "").json(t, &door)
		if len(door.Models) != 3 || door.Models[0].Name != "embed" || len(door.Models[0].Instances) != 1 ||
			door.Models[0].Instances[0]["name"] != "embed" || door.Models[0].Instances[0]["state"] != "running" {
			t.Errorf("/gpuguard/v1/models: %+v", door)
		}
		if ev, ok := door.Models[0].Instances[0]["last_event"].(map[string]any); ok {
			for k := range ev {
				if !slices.Contains([]string{"time", "event", "profile", "level", "reason"}, k) {
					t.Errorf("last_event carries %q: %v", k, ev)
				}
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			method, path, body string
			status             int
			code               string
		}{
			{"POST", "/v1/chat/completions", `{"model":"gpt-9","messages":[]}`, 404, `"model_not_found"`},
			{"GET", "/v1/models/gpt-9", "", 404, `"model_not_found"`},
			{"POST", "/v1/completions", `{"prompt":"no model"}`, 400, `"model_required"`},
			{"GET", "/v1/chat/completions", "", 400, `"model_required"`},
			{"POST", "/v1/completions", `{"model":`, 400, `"invalid_json"`},
			{"POST", "/v1/completions", `{"model":"qwen","prompt":"` + strings.Repeat("x", 70<<10) + `"}`, 413, `"body_too_large"`},
		} {
			a := call(t, tt.method, d.url+tt.path, tt.body)
			var e doorErr
			a.json(t, &e)
			h, present := a.header["X-Gpuguard-Instance"]
			if a.status != tt.status || string(e.Error.Code) != tt.code || e.Error.Message == "" || !present || h[0] != "" {
				t.Errorf("%s %s: %d %s (instance header %q), want %d code %s", tt.method, tt.path, a.status, a.body, h, tt.status, tt.code)
			}
		}
	})

	t.Run("sse stream in chunks", func(t *testing.T) {
		resp, err := http.Post(d.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"qwen","stream":true,"messages":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		first, err := rd.ReadString('\n')
		if err != nil || !strings.HasPrefix(first, "data: ") || !strings.Contains(first, `"content": "llm:"`) {
			t.Fatalf("first event %q %v", first, err)
		}
		// The child sends the rest only once the first has come through
		// both doors.
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rest := make([]byte, 0, 1024)
		for {
			l, err := rd.ReadString('\n')
			rest = append(rest, l...)
			if err != nil {
				break
			}
		}
		if !strings.Contains(string(rest), `"content": "qwen2.5-7b-instruct"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
			t.Errorf("rest of the stream %q", rest)
		}
		if resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("content type %q", resp.Header.Get("Content-Type"))
		}
	})

	t.Run("unknown models add no series", func(t *testing.T) {
		call(t, "POST", d.url+"/v1/completions", `{"model":"not-declared"}`)
		before := d.metricLines(t, "gpuguard_door_request")
		for range 50 {
			call(t, "POST", d.url+"/v1/completions", fmt.Sprintf(`{"model":"random-%x"}`, rand.Uint64()))
		}
		after := d.metricLines(t, "gpuguard_door_request")
		if len(after) != len(before) {
			t.Errorf("%d series before 50 unknown models, %d after", len(before), len(after))
		}
		for _, l := range after {
			if strings.Contains(l, "random-") {
				t.Errorf("a client's model became a label: %s", l)
			}
		}
		unknown404 := func(lines []string) string {
			for _, l := range lines {
				if v, ok := strings.CutPrefix(l, `gpuguard_door_requests_total{code="404",model="unknown"} `); ok {
					return v
				}
			}
			return ""
		}
		if b, a := unknown404(before), unknown404(after); b == "" || a == "" || mustAtoi(t, a)-mustAtoi(t, b) != 50 {
			t.Errorf("unknown 404s counted %s before and %s after 50 more", b, a)
		}
		want := []string{`gpuguard_door_requests_total{code="200",model="qwen"}`, "gpuguard_door_instances 2"}
		all := strings.Join(append(after, d.metricLines(t, "gpuguard_door_instances")...), "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("no %s in\n%s", w, all)
			}
		}
	})

	t.Run("status carries serve and models", func(t *testing.T) {
		_, out, _ := e.run([]string{"\x00raw", "status", "llm", "--json", "--runtime-dir", e.runDir})
		var st struct {
			Instances []struct {
				Serve  string
				Models []string
			}
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Instances) != 1 ||
			st.Instances[0].Serve != llm.door || !slices.Equal(st.Instances[0].Models, []string{"qwen2.5-7b-instruct", "qwen"}) {
			t.Errorf("status: %s %v", out, err)
		}
	})
}

// TestDoorFollowsInstances: an instance started after the door is routed
// within 2 s of answering, a reload's new names too, and an instance
// stopped is gone within 2 s of its end (its model then gets 404), as is
// one killed, whose socket is left behind.
func TestDoorFollowsInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.startGPUGuardDoor()
	if ids := d.modelIDs(t); len(ids) != 0 {
		t.Fatalf("models before any instance: %q", ids)
	}
	m := e.startModelInstance("late", "")
	ready := time.Now()
	waitFor(t, "the late instance routed", 10*time.Second, func() bool { return slices.Equal(d.modelIDs(t), []string{"late"}) })
	if took := time.Since(ready); took > 2*time.Second {
		t.Errorf("routed %s after its front door was ready, want within 2s", took)
	}
	if a := call(t, "POST", d.url+"/v1/completions", `{"model":"late"}`); a.status != 200 || a.header.Get("X-GPUGuard-Instance") != "late" {
		t.Fatalf("%d %s", a.status, a.body)
	}

	// [serve] models reloads: the door follows the new names.
	text, err := os.ReadFile(m.policy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.policy, []byte(string(text)+"models = [\"late-v2\", \"late\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := e.run([]string{"\x00raw", "reload", "late", "--runtime-dir", e.runDir}); code != 0 || !strings.Contains(out, "serve.models") {
		t.Fatalf("reload: %d %s %s", code, out, stderr)
	}
	reloaded := time.Now()
	waitFor(t, "the new names routed", 10*time.Second, func() bool { return slices.Equal(d.modelIDs(t), []string{"late", "late-v2"}) })
	if took := time.Since(reloaded); took > 2*time.Second {
		t.Errorf("new names routed %s after the reload, want within 2s", took)
	}
	if a := call(t, "POST", d.url+"/v1/completions", `{"model":"late"}`); a.status != 200 || !strings.Contains(a.body, "late:late-v2") {
		t.Errorf("after the reload the alias reaches the child as %s", a.body)
	}

	m.stop(t)
	stopped := time.Now()
	waitFor(t, "the stopped instance gone", 10*time.Second, func() bool { return len(d.modelIDs(t)) == 0 })
	if took := time.Since(stopped); took > 2*time.Second {
		t.Errorf("gone %s after its end, want within 2s", took)
	}
	var e404 doorErr
	a := call(t, "POST", d.url+"/v1/completions", `{"model":"late"}`)
	a.json(t, &e404)
	if a.status != 404 || string(e404.Error.Code) != `"model_not_found"` {
		t.Errorf("a stopped instance's model: %d %s", a.status, a.body)
	}
	if got := d.metricLines(t, "gpuguard_door_instances"); !slices.Contains(got, "gpuguard_door_instances 0") {
		t.Errorf("instances gauge %q", got)
	}

	// A killed instance leaves its socket behind, refusing connections.
	k := e.startModelInstance("killed", "")
	waitFor(t, "the second instance routed", 10*time.Second, func() bool { return slices.Equal(d.modelIDs(t), []string{"killed"}) })
	k.p.signal(syscall.SIGKILL)
	k.p.wait()
	killed := time.Now()
	waitFor(t, "the killed instance gone", 10*time.Second, func() bool { return len(d.modelIDs(t)) == 0 })
	if took := time.Since(killed); took > 2*time.Second {
		t.Errorf("gone %s after it was killed, want within 2s", took)
	}
}

// TestDoorWakesSleepingModel: a request through `gpuguard door` for a
// model whose instance sleeps (the vLLM fake, asleep through its sleep
// API) is held by the instance's own front door, which wakes it; the
// answer comes back through both doors.
func TestDoorWakesSleepingModel(t *testing.T) {
	t.Parallel()
	s := startSleepRun(t, "vllm_fake.py", vllmActions("60s"), "VLLM_SERVER_DEV_MODE=1")
	d := s.e.startGPUGuardDoor()
	if code, out, stderr := s.e.run([]string{"step", "sleepy", "down", "--runtime-dir", s.e.runDir}); code != 0 || strings.TrimSpace(out) != "asleep" {
		t.Fatalf("step down: %d %q %s", code, out, stderr)
	}
	waitFor(t, "the door to see it asleep", 10*time.Second, func() bool {
		var one struct{ GPUGuard struct{ State string } }
		a := call(t, "GET", d.url+"/v1/models/sleepy", "")
		return a.status == 200 && json.Unmarshal([]byte(a.body), &one) == nil && one.GPUGuard.State == "asleep"
	})
	a := call(t, "POST", d.url+"/v1/completions", `{"model":"sleepy","prompt":"wake up"}`)
	if a.status != 200 || !strings.Contains(a.body, `"text": "ok"`) || a.header.Get("X-GPUGuard-Instance") != "sleepy" || a.header.Get("X-GPUGuard-Profile") != "awake" {
		t.Fatalf("through the door: %d %v %s", a.status, a.header, a.body)
	}
	if !slices.ContainsFunc(events(s.e, "stepup"), func(ev string) bool { return strings.Contains(ev, `"reason":"request"`) }) {
		t.Errorf("no step up by request in the journal: %q", events(s.e, "stepup"))
	}
}

// TestDoorAddressInUse: `gpuguard door` on an address in use exits 1 at
// once, with one line naming the address and the flag; so does
// --metrics-addr.
func TestDoorAddressInUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	for _, tt := range []struct{ flag, args string }{
		{"--listen", "--listen " + addr},
		{"--metrics-addr", "--listen 127.0.0.1:0 --metrics-addr " + addr},
	} {
		code, out, stderr := e.run(append([]string{"\x00raw", "door", "--runtime-dir", e.runDir}, strings.Fields(tt.args)...))
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || out != "" || len(lines) != 1 || lines[0] != "gpuguard: cannot listen on "+addr+" ("+tt.flag+"): address already in use" {
			t.Errorf("%s in use: exit %d, stdout %q, stderr %q", tt.flag, code, out, stderr)
		}
	}
}
