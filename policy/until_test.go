package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// untilProfile is a ladder whose second profile's enter is the given
// action, on line 11 of the file.
func untilProfile(action string) string {
	return actionsServe + "[[profile]]\nname = \"a\"\nlive = true\n\n[[profile]]\nname = \"b\"\nlive = true\nenter = [" + action + "]\n"
}

// TestAcceptAndUntilParse: accept and until decode, until with its
// defaults (status [200], any body, 120s), and an action without them
// accepts only 2xx and waits for nothing.
func TestAcceptAndUntilParse(t *testing.T) {
	src := untilProfile(`
  { path = "/models/unload", body = '{"model":"tiny"}', accept = [400],
    until = { path = "/props?model=tiny&autoload=false", status = [400, 404], body = "not loaded", timeout = "30s" } },
  { path = "/models/load", until = { path = "/props?model=tiny&autoload=false" } },
  { path = "/plain" },
`)
	pol, err := Parse([]byte(src), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	acts := pol.Profiles[1].Enter
	if len(acts) != 3 {
		t.Fatalf("enter = %+v", acts)
	}
	want := Until{Path: "/props?model=tiny&autoload=false", Status: []int{400, 404}, Body: "not loaded", Timeout: 30 * time.Second}
	if !slices.Equal(acts[0].Accept, []int{400}) || !acts[0].Until.equal(want) {
		t.Errorf("unload = %+v, want accept [400] and until %+v", acts[0], want)
	}
	def := Until{Path: "/props?model=tiny&autoload=false", Status: []int{200}, Timeout: DefaultUntilTimeout}
	if len(acts[1].Accept) != 0 || !acts[1].Until.equal(def) || !acts[1].Until.Set() {
		t.Errorf("load = %+v, want no accept and until %+v", acts[1], def)
	}
	if len(acts[2].Accept) != 0 || acts[2].Until.Set() {
		t.Errorf("plain = %+v, want no accept and no until", acts[2])
	}
}

// TestAcceptAndUntilErrors: each bad accept or until is a configuration
// error naming the line and the key.
func TestAcceptAndUntilErrors(t *testing.T) {
	for _, tt := range []struct {
		name, action string
		key, msg     string
	}{
		{"accept not an array", `{ path = "/s", accept = 400 }`, "profile[1].enter[0].accept", "must be an array"},
		{"accept not a number", `{ path = "/s", accept = ["400"] }`, "profile[1].enter[0].accept[0]", "must be an HTTP status"},
		{"accept out of range", `{ path = "/s", accept = [200, 4000] }`, "profile[1].enter[0].accept[1]", "from 100 to 599"},
		{"accept too long", `{ path = "/s", accept = [400,400,400,400,400,400,400,400,400,400,400,400,400,400,400,400,400] }`, "profile[1].enter[0].accept", "at most 16"},
		{"until not a table", `{ path = "/s", until = "/is_sleeping" }`, "profile[1].enter[0].until", "must be a table"},
		{"until without path", `{ path = "/s", until = { status = [200] } }`, "profile[1].enter[0].until", "missing path"},
		{"until path relative", `{ path = "/s", until = { path = "is_sleeping" } }`, "profile[1].enter[0].until.path", "must be a path"},
		{"until status empty", `{ path = "/s", until = { path = "/x", status = [] } }`, "profile[1].enter[0].until.status", "at least one status"},
		{"until status bad", `{ path = "/s", until = { path = "/x", status = [99] } }`, "profile[1].enter[0].until.status[0]", "from 100 to 599"},
		{"until body", `{ path = "/s", until = { path = "/x", body = true } }`, "profile[1].enter[0].until.body", "must be a string"},
		{"until timeout", `{ path = "/s", until = { path = "/x", timeout = "0s" } }`, "profile[1].enter[0].until.timeout", "at least"},
		{"until typo", `{ path = "/s", until = { path = "/x", stauts = [200] } }`, "profile[1].enter[0].until.stauts", `did you mean "status"`},
		{"accept typo", `{ path = "/s", acept = [400] }`, "profile[1].enter[0].acept", `did you mean "accept"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(untilProfile(tt.action)), "p.toml")
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Parse error = %v, want an ErrorList", err)
			}
			e := list[0]
			if e.Line != 11 || e.Key != tt.key || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got %v (line %d, key %q), want line 11 key %q containing %q", e, e.Line, e.Key, tt.key, tt.msg)
			}
		})
	}
}

// TestAcceptAndUntilDiff: a change to an action's accept or until is a
// change to the ladder, so a reload notices it.
func TestAcceptAndUntilDiff(t *testing.T) {
	src := untilProfile(`{ path = "/s", accept = [400], until = { path = "/x" } }`)
	a, err := Parse([]byte(src), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Action)
	}{
		{"accept", func(x *Action) { x.Accept = []int{400, 404} }},
		{"until path", func(x *Action) { x.Until.Path = "/y" }},
		{"until status", func(x *Action) { x.Until.Status = []int{400} }},
		{"until body", func(x *Action) { x.Until.Body = "ok" }},
		{"until timeout", func(x *Action) { x.Until.Timeout = time.Second }},
	} {
		b, _ := Parse([]byte(src), "p.toml")
		tt.edit(&b.Profiles[1].Enter[0])
		if got := Diff(a, b); len(got) != 1 || got[0] != "profile" {
			t.Errorf("%s: Diff = %v, want [profile]", tt.name, got)
		}
	}
	if b, _ := Parse([]byte(src), "p.toml"); len(Diff(a, b)) != 0 {
		t.Errorf("the same file differs: %v", Diff(a, b))
	}
}
