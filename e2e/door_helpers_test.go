package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// modelInstancePolicy puts model_fake.py behind a front door. %s: listen,
// upstream, then more [serve] keys (models).
const modelInstancePolicy = `
[watch]
backend  = "sim"
interval = "100ms"
[restart]
backoff         = "100ms"
stop_timeout    = "5s"
release_timeout = "1s"
[serve]
listen   = "%s"
upstream = "http://%s"
hold     = "30s"
%s
`

// modelInstance is one `gpuguard run` of model_fake.py with a front door.
type modelInstance struct {
	name, door, policy string
	p                  *proc
}

// startModelInstance runs instance name in the sandbox's runtime dir,
// with its own state dir, and waits until its front door passes requests.
func (e *env) startModelInstance(name, serveKeys string, extraEnv ...string) *modelInstance {
	e.t.Helper()
	fake := fakeServer(e.t, "model_fake.py")
	m := &modelInstance{name: name, door: freeLoopbackAddr(e.t), policy: e.path(name + ".toml")}
	child := freeLoopbackAddr(e.t)
	if err := os.WriteFile(m.policy, []byte(fmt.Sprintf(modelInstancePolicy, m.door, child, serveKeys)), 0o644); err != nil {
		e.t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(child)
	m.p = e.start([]string{"\x00raw", "run", "--name", name, "--policy", m.policy, "--backend", "sim", "--sim-dir", e.path("sim"),
		"--state-dir", filepath.Join(e.stateDir, name), "--runtime-dir", e.runDir, "--", "/usr/bin/python3", fake, port}, extraEnv...)
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("instance %s's stderr:\n%s", name, m.p.stderr.String())
		}
	})
	waitFor(e.t, "instance "+name+" ready at its front door", 60*time.Second, func() bool {
		resp, err := http.Get("http://" + m.door + "/gpuguard/v1/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return m
}

// stop ends the instance and waits for it.
func (m *modelInstance) stop(t *testing.T) {
	t.Helper()
	m.p.signal(sigterm)
	m.p.wait()
}

// gpuguardDoor is a running `gpuguard door`.
type gpuguardDoor struct {
	p              *proc
	url, metricsAt string
}

// startGPUGuardDoor runs `gpuguard door` on the sandbox's runtime dir and
// waits until it listens.
func (e *env) startGPUGuardDoor(args ...string) *gpuguardDoor {
	e.t.Helper()
	addr, metricsAt := freeLoopbackAddr(e.t), freeLoopbackAddr(e.t)
	d := &gpuguardDoor{url: "http://" + addr, metricsAt: metricsAt}
	d.p = e.start(append([]string{"\x00raw", "door", "--listen", addr, "--runtime-dir", e.runDir, "--metrics-addr", metricsAt}, args...))
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("gpuguard door's stderr:\n%s", d.p.stderr.String())
		}
	})
	waitFor(e.t, "gpuguard door to listen", 30*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return d
}

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// json decodes the body into v.
func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(a.body), v); err != nil {
		t.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
}

// call sends one request (body "" for none) and reads the answer.
func call(t *testing.T, method, url, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", method, url, err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// modelIDs is the ids of GET /v1/models, in order.
func (d *gpuguardDoor) modelIDs(t *testing.T) []string {
	t.Helper()
	var l struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	call(t, "GET", d.url+"/v1/models", "").json(t, &l)
	ids := []string{}
	for _, m := range l.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// metricLines are the door's /metrics lines starting with prefix.
func (d *gpuguardDoor) metricLines(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(call(t, "GET", "http://"+d.metricsAt+"/metrics", "").body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
