package e2e

import (
	"strings"
	"testing"
	"time"
)

// reasonServer is a model server that answers every POST 500 with the
// request's path, decoded, as its reason phrase: a deferred request's
// path comes back into the task's last error as the child wrote it.
var reasonServer = pyServer(`
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(500, urllib.parse.unquote(self.path))
        self.send_header("Content-Length", "0")
        self.end_headers()`)

// TestTextOutputEscapesControlCharacters is issue 42's fifth attack: a
// deferred request's path with ESC and BEL came back in its task's last
// error (and a reserve's tool as it was sent), and `gpuguard tasks` and
// `gpuguard status` (and run's own log) printed them raw, so a client could rewrite what an
// operator's terminal shows. Now both show them escaped (\x1b, \a). The
// control: the same flow with a plain path shows that path as it is (the
// error is there to be seen).
func TestTextOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	d := startDeferDoor(t, deferDoorOptions{child: reasonServer, deferKeys: "max_attempts = 1"})
	d.deferP2(t, "/plain-path", []byte("x"))
	d.deferP2(t, "/%1B%07", []byte("x")) // short: the table cuts an error at 60 characters
	c := dialInstance(t, d.e.runDir, "dq")
	if r := c.call(map[string]any{"type": "reserve", "bytes": 1 << 30, "priority": "P2", "tool": "t\x1b[31mred\a",
		"payload": map[string]any{"a": 1}}); r["decision"] != "defer" {
		t.Fatalf("the reserve with a tool of control characters: %v", r)
	}
	d.memoryFree(t)
	var tasks, status string
	waitFor(t, "both requests to be dead, and the status to show it", 30*time.Second, func() bool {
		_, tasks, _ = d.e.runRaw([]string{"tasks", "dq", "--state-dir", d.e.stateDir})
		_, status, _ = d.e.runRaw([]string{"status", "dq", "--runtime-dir", d.e.runDir})
		return strings.Count(tasks, "dead") == 2 && strings.Contains(status, "task_dead")
	})
	if !strings.Contains(tasks, "500 /plain-path") {
		t.Errorf("gpuguard tasks does not show the plain path's error (control):\n%s", tasks)
	}
	for what, out := range map[string]string{"gpuguard tasks": tasks, "gpuguard status": status} {
		if i := strings.IndexAny(out, "\x1b\a"); i >= 0 {
			t.Errorf("%s prints a control character raw at byte %d: %q", what, i, out)
		}
	}
	wantAll(t, "gpuguard tasks", tasks, `500 /\x1b\a`, `t\x1b[31mred\a`)
	// gpuguard run's own log quotes the error too (the task is dead).
	if log := d.p.stderr.String(); strings.ContainsAny(log, "\x1b\a") || !strings.Contains(log, `500 /\x1b\a`) {
		t.Errorf("gpuguard run's log, want the error escaped:\n%q", log)
	}
	if !strings.Contains(status, `500 /\x1b\a)`) {
		t.Errorf("gpuguard status does not show the last event's error escaped:\n%s", status)
	}
}
