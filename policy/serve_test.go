package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestServeErrors: every bad [serve] value is a configuration error that
// names the file, the line and the key.
func TestServeErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		line      int
		key, msg  string
	}{
		{"listen without upstream", "[serve]\nlisten = \"127.0.0.1:8000\"", 2, "serve.listen", "needs serve.upstream"},
		{"listen not host:port", "[serve]\nlisten = \"8000\"\nupstream = \"http://127.0.0.1:8001\"", 2, "serve.listen", "HOST:PORT"},
		{"upstream https", "[serve]\nlisten = \":8000\"\nupstream = \"https://127.0.0.1:8001\"", 3, "serve.upstream", "http:// URL"},
		{"upstream no scheme", "[serve]\nlisten = \":8000\"\nupstream = \"127.0.0.1:8001\"", 3, "serve.upstream", "http:// URL"},
		{"upstream no host", "[serve]\nlisten = \":8000\"\nupstream = \"http://\"", 3, "serve.upstream", "must name a host"},
		{"upstream query", "[serve]\nlisten = \":8000\"\nupstream = \"http://h:1/?a=b\"", 3, "serve.upstream", "without user, query"},
		{"upstream is the door", "[serve]\nlisten = \"127.0.0.1:8000\"\nupstream = \"http://127.0.0.1:8000\"", 3, "serve.upstream", "front door's own address"},
		{"health not a path", "[serve]\nhealth = \"health\"", 2, "serve.health", "must be a path"},
		{"health full URL", "[serve]\nhealth = \"http://x/health\"", 2, "serve.health", "must be a path"},
		{"hold negative", "[serve]\nhold = \"-1s\"", 2, "serve.hold", "must not be negative"},
		{"hold number", "[serve]\nhold = 5", 2, "serve.hold", "duration string"},
		{"max_held negative", "[serve]\nmax_held = -1", 2, "serve.max_held", "between 0 and"},
		{"max_held huge", "[serve]\nmax_held = 10000000", 2, "serve.max_held", "between 0 and"},
		{"retry string", "[serve]\nretry = \"yes\"", 2, "serve.retry", "true or false"},
		{"fallback ftp", "[serve]\nfallback = \"ftp://x\"", 2, "serve.fallback", "http:// URL"},
		{"priority P3", "[serve]\npriority = \"P3\"", 2, "serve.priority", `"P0", "P1", "P2"`},
		{"make_room string", "[serve]\nmake_room = \"yes\"", 2, "serve.make_room", "true or false"},
		{"keep_awake negative", "[serve]\nwake = true\nkeep_awake = \"-1s\"", 3, "serve.keep_awake", "must not be negative"},
		{"keep_awake number", "[serve]\nkeep_awake = 60", 2, "serve.keep_awake", "duration string"},
		{"keep_awake too long", "[serve]\nkeep_awake = \"31d\"", 2, "serve.keep_awake", "must be at most"},
		{"models not a list", "[serve]\nmodels = \"qwen\"", 2, "serve.models", "must be an array"},
		{"models empty name", "[serve]\nmodels = [\"qwen\", \"\"]", 2, "serve.models[1]", "1 to 256 bytes"},
		{"models twice", "[serve]\nmodels = [\"qwen\",\n  \"qwen\"]", 3, "serve.models[1]", "listed twice"},
		{"models space", "[serve]\nmodels = [\" qwen\"]", 2, "serve.models[0]", "no space around it"},
		{"models control", "[serve]\nmodels = [\"q\\u001bwen\"]", 2, "serve.models[0]", "no control characters"},
		{"models number", "[serve]\nmodels = [7]", 2, "serve.models[0]", "must be a string"},
		{"unknown key", "[serve]\nupstreem = \"http://x:1\"", 2, "serve.upstreem", `did you mean "upstream"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "p.toml")
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Parse error = %v, want an ErrorList", err)
			}
			e := list[0]
			if e.Line != tt.line || e.Key != tt.key || !strings.Contains(e.Msg, tt.msg) {
				t.Fatalf("got %q (line %d key %q), want line %d key %q msg containing %q", err, e.Line, e.Key, tt.line, tt.key, tt.msg)
			}
		})
	}
}

// TestServeAccepts: good values, and the trailing slash of a base URL is
// dropped (paths are appended to it).
func TestServeAccepts(t *testing.T) {
	p, err := Parse([]byte("[serve]\nlisten = \"0.0.0.0:8000\"\nupstream = \"http://127.0.0.1:8001/\"\nhold = \"0s\"\nmax_held = 0\n"), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := p.Serve
	if !s.Enabled() || s.Upstream != "http://127.0.0.1:8001" || s.Hold != 0 || s.MaxHeld != 0 || s.Health != "/health" || s.Priority != PriorityP0 {
		t.Fatalf("serve = %+v", s)
	}
	if got := s.ModelNames("llm"); len(got) != 1 || got[0] != "llm" {
		t.Fatalf("default model names = %q, want the instance's name", got)
	}
	p, err = Parse([]byte("[serve]\nmodels = [\"Qwen/Qwen2.5-7B-Instruct\", \"qwen:7b\", \"qwen chat\"]\n"), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Serve.ModelNames("llm"); strings.Join(got, "|") != "Qwen/Qwen2.5-7B-Instruct|qwen:7b|qwen chat" {
		t.Fatalf("model names = %q", got)
	}
	// Upstream alone (for server actions) is no front door.
	p, err = Parse([]byte("[serve]\nupstream = \"http://127.0.0.1:8001\"\n"), "p.toml")
	if err != nil || p.Serve.Enabled() {
		t.Fatalf("upstream alone: %v, %+v", err, p.Serve)
	}
	if d := Default().Serve; d.Enabled() || d.Hold != 120*time.Second || d.MaxHeld != 1000 || !d.Retry ||
		!d.MakeRoom || d.KeepAwake != 60*time.Second {
		t.Fatalf("default serve = %+v", d)
	}
}
