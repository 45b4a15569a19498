package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sockClient is a raw connection to an instance's control socket: lines
// of JSON out, objects back, as a child would speak it.
type sockClient struct {
	t  *testing.T
	c  net.Conn
	sc *bufio.Scanner
}

// dialInstance connects to name's socket, waiting (bounded) for the
// instance to listen after a start.
func dialInstance(t *testing.T, runDir, name string) *sockClient {
	t.Helper()
	path := filepath.Join(runDir, name+".sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			sc := bufio.NewScanner(c)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			s := &sockClient{t: t, c: c, sc: sc}
			t.Cleanup(func() { c.Close() })
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("dialing %s: %v", path, err)
		}
		// The instance is starting: wait for its socket to appear rather
		// than spin (a short, bounded poll of the thing we need).
		waitForPath(path, deadline)
	}
}

func waitForPath(path string, deadline time.Time) {
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// send writes one request.
func (s *sockClient) send(req map[string]any) {
	s.t.Helper()
	b, _ := json.Marshal(req)
	s.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.c.Write(append(b, '\n')); err != nil {
		s.t.Fatal(err)
	}
}

// next reads one object (a reply or an event) within d.
func (s *sockClient) next(d time.Duration) (map[string]any, bool) {
	s.t.Helper()
	s.c.SetReadDeadline(time.Now().Add(d))
	if !s.sc.Scan() {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(s.sc.Bytes(), &m); err != nil {
		s.t.Fatalf("bad line %q: %v", s.sc.Text(), err)
	}
	return m, true
}

// call sends req and returns the next line that is not a profile event.
func (s *sockClient) call(req map[string]any) map[string]any {
	s.t.Helper()
	s.send(req)
	for {
		m, ok := s.next(30 * time.Second)
		if !ok {
			s.t.Fatalf("no reply to %v", req)
		}
		if m["type"] != "profile" && m["type"] != "task" {
			return m
		}
	}
}

// task waits for a task delivery within d.
func (s *sockClient) task(d time.Duration) (map[string]any, bool) {
	s.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		m, ok := s.next(time.Until(end))
		if !ok {
			return nil, false
		}
		if m["type"] == "task" {
			return m, true
		}
	}
	return nil, false
}

// setSim sets a simulated tenant's usage on GPU 0 of simDir (bytes).
func setSim(t *testing.T, simDir, tenant string, bytes string) {
	t.Helper()
	dir := filepath.Join(simDir, "0")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".tmp-"+tenant)
	if err := os.WriteFile(tmp, []byte(bytes), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, tenant)); err != nil {
		t.Fatal(err)
	}
}

// tasksJSON runs `gpuguard tasks NAME --json`.
func (e *env) tasksJSON(name string) []map[string]any {
	e.t.Helper()
	code, out, stderr := e.runRaw([]string{"tasks", name, "--json", "--state-dir", e.stateDir})
	if code != 0 {
		e.t.Fatalf("gpuguard tasks: exit %d: %s", code, stderr)
	}
	var v struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &v); err != nil {
		e.t.Fatalf("tasks --json: %v: %s", err, out)
	}
	return v.Tasks
}

// deferEmbed reserves 1 GiB for a P2 "embed" task with a payload until
// a sample has seen the full GPU and the answer is defer (at most 30 s),
// and returns the last answer.
func (c *sockClient) deferEmbed() map[string]any {
	var rep map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep = c.call(map[string]any{"type": "reserve", "bytes": 1 << 30, "priority": "P2", "tool": "embed", "payload": map[string]any{"doc": 1}})
		if rep["decision"] == "defer" || time.Now().After(deadline) {
			return rep
		}
		if rep["lease"] != "" {
			c.call(map[string]any{"type": "release", "lease": rep["lease"]})
		}
	}
}
