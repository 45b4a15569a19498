package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const actionsServe = "[serve]\nlisten = \"127.0.0.1:8000\"\nupstream = \"http://127.0.0.1:8001\"\n"

// TestActionsParse: enter and leave decode with their defaults (POST,
// 60s), and serving = false is kept.
func TestActionsParse(t *testing.T) {
	src := actionsServe + `
[[profile]]
name = "awake"
live = true

[[profile]]
name = "asleep"
live = true
serving = false
needs = "2GiB"
enter = [
  { path = "/sleep?level=1&mode=wait", timeout = "120s" },
]
leave = [
  { method = "PUT", path = "/wake_up", body = '{"tags":["weights"]}', headers = { X-Key = "k" } },
]
`
	pol, err := Parse([]byte(src), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	awake, asleep := pol.Profiles[0], pol.Profiles[1]
	if !awake.Serving() || asleep.Serving() {
		t.Fatalf("serving: awake %v asleep %v, want true false", awake.Serving(), asleep.Serving())
	}
	if len(asleep.Enter) != 1 || len(asleep.Leave) != 1 {
		t.Fatalf("enter %v leave %v", asleep.Enter, asleep.Leave)
	}
	e, l := asleep.Enter[0], asleep.Leave[0]
	if e.Method != "POST" || e.Path != "/sleep?level=1&mode=wait" || e.Timeout != 120*time.Second || e.Body != "" {
		t.Errorf("enter = %+v", e)
	}
	if l.Method != "PUT" || l.Timeout != DefaultActionTimeout || l.Headers["X-Key"] != "k" || l.ContentType() != "application/json" {
		t.Errorf("leave = %+v (content type %q)", l, l.ContentType())
	}
	if (Action{Body: "hello"}).ContentType() != "text/plain; charset=utf-8" || (Action{}).ContentType() != "" {
		t.Error("ContentType of a text or empty body is wrong")
	}
}

// TestActionsErrors: each bad action or serving rule is a configuration
// error naming the file, line and key.
func TestActionsErrors(t *testing.T) {
	prof := func(body string) string {
		return "[[profile]]\nname = \"a\"\nlive = true\n\n[[profile]]\nname = \"b\"\n" + body
	}
	for _, tt := range []struct {
		name, src string
		line      int
		key, msg  string
	}{
		{"enter without live", actionsServe + prof("enter = [{ path = \"/sleep\" }]\n"), 10, "profile[1].enter", "needs live = true"},
		{"leave without live", actionsServe + prof("live = false\nleave = [{ path = \"/wake_up\" }]\n"), 11, "profile[1].leave", "needs live = true"},
		{"enter without upstream", prof("live = true\nenter = [{ path = \"/sleep\" }]\n"), 8, "profile[1].enter", "needs serve.upstream"},
		{"serving after asleep", actionsServe + "[[profile]]\nname = \"a\"\nserving = false\n\n[[profile]]\nname = \"b\"\n", 8, "profile[1]", "every serving = false profile must come after"},
		{"serving string", actionsServe + prof("serving = \"no\"\n"), 10, "profile[1].serving", "true or false"},
		{"path relative", actionsServe + prof("live = true\nenter = [{ path = \"sleep\" }]\n"), 11, "profile[1].enter[0].path", "must be a path"},
		{"path URL", actionsServe + prof("live = true\nenter = [{ path = \"http://x/sleep\" }]\n"), 11, "profile[1].enter[0].path", "must be a path"},
		{"path missing", actionsServe + prof("live = true\nenter = [{ method = \"POST\" }]\n"), 11, "profile[1].enter[0]", "missing path"},
		{"method lower", actionsServe + prof("live = true\nenter = [{ method = \"post\", path = \"/s\" }]\n"), 11, "profile[1].enter[0].method", "HTTP method"},
		{"timeout zero", actionsServe + prof("live = true\nenter = [{ path = \"/s\", timeout = \"0s\" }]\n"), 11, "profile[1].enter[0].timeout", "at least"},
		{"header value", actionsServe + prof("live = true\nenter = [{ path = \"/s\", headers = { A = 1 } }]\n"), 11, "profile[1].enter[0].headers.A", "must be a string"},
		{"header name", actionsServe + prof("live = true\nenter = [{ path = \"/s\", headers = { \"a b\" = \"x\" } }]\n"), 11, "profile[1].enter[0].headers.\"a b\"", "invalid header name"},
		{"unknown key", actionsServe + prof("live = true\nenter = [{ path = \"/s\", bdy = \"x\" }]\n"), 11, "profile[1].enter[0].bdy", `did you mean "body"`},
		{"not a table", actionsServe + prof("live = true\nenter = [\"/sleep\"]\n"), 11, "profile[1].enter[0]", "must be a table"},
		{"not an array", actionsServe + prof("live = true\nenter = \"/sleep\"\n"), 11, "profile[1].enter", "must be an array"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "p.toml")
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Parse error = %v, want an ErrorList", err)
			}
			e := list[0]
			if e.Line != tt.line || e.Key != tt.key || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got %v (line %d, key %q), want line %d key %q containing %q", e, e.Line, e.Key, tt.line, tt.key, tt.msg)
			}
		})
	}
}

// TestActionsDiff: a change to a profile's actions or serving is a change
// to the ladder, so a reload notices it.
func TestActionsDiff(t *testing.T) {
	src := actionsServe + "[[profile]]\nname = \"a\"\nlive = true\nenter = [{ path = \"/sleep\" }]\n"
	a, err := Parse([]byte(src), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Policy)
	}{
		{"path", func(p *Policy) { p.Profiles[0].Enter[0].Path = "/other" }},
		{"header", func(p *Policy) { p.Profiles[0].Enter[0].Headers["A"] = "1" }},
		{"leave", func(p *Policy) { p.Profiles[0].Leave = []Action{{Path: "/wake_up"}} }},
		{"serving", func(p *Policy) { p.Profiles[0].NotServing = true }},
	} {
		b, _ := Parse([]byte(src), "p.toml")
		tt.edit(b)
		if got := Diff(a, b); len(got) != 1 || got[0] != "profile" {
			t.Errorf("%s: Diff = %v, want [profile]", tt.name, got)
		}
	}
}

// TestActionsLadder: policy check's ladder shows each profile's actions
// and which profiles are asleep.
func TestActionsLadder(t *testing.T) {
	src := actionsServe + "[[profile]]\nname = \"a\"\nlive = true\n\n[[profile]]\nname = \"b\"\nlive = true\nserving = false\nenter = [{ path = \"/sleep?level=1\" }]\nleave = [{ path = \"/wake_up\" }]\n"
	pol, err := Parse([]byte(src), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := pol.WriteLadder(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "asleep; enter POST /sleep?level=1; leave POST /wake_up") {
		t.Errorf("ladder:\n%s", b.String())
	}
}

// TestShippedServerActionExamples: the server-action examples parse and
// each has a serving = false profile, with actions where the server has
// an admin API (all but TGI, which is stopped and started on demand).
func TestShippedServerActionExamples(t *testing.T) {
	for name, wantActions := range map[string]bool{"vllm-sleep": true, "sglang": true, "ollama": true, "llama-server": true, "llama-server-single": false, "tgi": false} {
		p, err := Load("../examples/policies/" + name + ".toml")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		last := p.Profiles[len(p.Profiles)-1]
		if last.Serving() || (len(last.Enter) > 0) != wantActions || !p.Serve.Enabled() {
			t.Errorf("%s: last profile %+v, front door %v: want serving = false, actions %v, a door", name, last, p.Serve.Enabled(), wantActions)
		}
	}
}
