package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestProtocolExampleSession replays docs/protocol.md's example session on
// one connection to a real instance, as socat would, and checks that the
// replies and events are the ones the page shows: every field of an error
// reply, of a step's reply and of a profile event. Only the two replies whose
// figures depend on the machine (status, a granted reserve) are checked by
// their ok and id alone.
func TestProtocolExampleSession(t *testing.T) {
	t.Parallel()
	session := exampleSession(t)
	e := newEnv(t)
	pol := e.policy(`name = "demo"
[watch]
backend = "sim"
interval = "50ms"
[[profile]]
name = "fp16"
live = true
env = { DTYPE = "float16", MAX_BATCH = "32" }
[[profile]]
name = "int8"
live = true
env = { DTYPE = "int8", MAX_BATCH = "16" }
[[profile]]
name = "int4"
live = true
`)
	p := e.start(append([]string{"run", "--policy", pol}, sh(`trap 'exit 0' TERM; trap ':' USR1; echo up; while :; do sleep 0.02; done`)...))
	p.expect("up")

	c, err := net.Dial("unix", filepath.Join(e.runDir, "demo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	var events []map[string]any
	for _, x := range session {
		if _, err := c.Write([]byte(x.request + "\n")); err != nil {
			t.Fatalf("%s: %v", x.request, err)
		}
		// Events may come before or after the reply; the reply has "ok".
		var got map[string]any
		for got == nil {
			line, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: no reply: %v", x.request, err)
			}
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("%s: reply %q: %v", x.request, line, err)
			}
			if _, ok := m["ok"]; ok {
				got = m
			} else {
				events = append(events, m)
			}
		}
		want := decodeDocLine(t, x.reply)
		if figures := strings.Contains(x.request, `"type":"status"`) && want["ok"] == true ||
			strings.Contains(x.request, `"type":"reserve"`) && want["ok"] == true; figures {
			got = map[string]any{"ok": got["ok"], "id": got["id"]}
			want = map[string]any{"ok": want["ok"], "id": want["id"]}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got  %v\n docs %v", x.request, got, want)
		}
	}
	// The last step's event may follow its reply.
	var want []map[string]any
	for _, x := range session {
		for _, ev := range x.events {
			want = append(want, decodeDocLine(t, ev))
		}
	}
	for len(events) < len(want) {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("got %d of the page's %d events: %v", len(events), len(want), err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, m)
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events\n got  %v\n docs %v", events, want)
	}
}

// exchange is one request of the example session, the reply the page shows
// for it, and the events it shows after it.
type exchange struct {
	request, reply string
	events         []string
}

// exampleSession reads the socat session of docs/protocol.md.
func exampleSession(t *testing.T) []exchange {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "$ socat - UNIX-CONNECT:")
	if !ok {
		t.Fatal("docs/protocol.md has no socat session")
	}
	block, _, _ = strings.Cut(block, "```")
	lines := strings.Split(strings.TrimSpace(block), "\n")[1:] // after the socat line
	var xs []exchange
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, `{"ok":`):
			xs[len(xs)-1].reply = l
		case strings.HasPrefix(l, `{"type":"profile"`):
			xs[len(xs)-1].events = append(xs[len(xs)-1].events, l)
		default:
			xs = append(xs, exchange{request: l})
		}
	}
	for _, x := range xs {
		if x.reply == "" {
			t.Fatalf("docs/protocol.md: no reply to %s", x.request)
		}
	}
	if len(xs) < 10 {
		t.Fatalf("docs/protocol.md: only %d requests in the session", len(xs))
	}
	return xs
}

func decodeDocLine(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("docs/protocol.md: %s: %v", line, err)
	}
	return m
}
