package door

import (
	"slices"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

// inst is a found instance with a front door; models nil means the
// default (its name).
func inst(name, serve, state string, ready bool, models ...string) Found {
	return Found{Socket: "/run/gpuguard/" + name + ".sock",
		Status: api.Status{Name: name, Serve: serve, State: state, Ready: ready, Models: models}}
}

func backendNames(bs []*Backend) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

// TestBuildNames: every name of every instance with a front door, aliases
// included, sorted; the default name is the instance's; an instance
// without a door, or with an address that cannot be dialled, is not routed.
func TestBuildNames(t *testing.T) {
	tb := Build(nil, []Found{
		inst("llm", "127.0.0.1:8001", api.StateRunning, true, "qwen2.5-7b-instruct", "qwen"),
		inst("embed", ":8002", api.StateRunning, true),
		inst("batch", "", api.StateRunning, true), // no front door
		inst("odd", "nonsense", api.StateRunning, true),
		inst("coder", "[::]:8003", api.StateAsleep, false, "Qwen/Qwen2.5-Coder-7B", "coder", "coder"),
	})
	if got, want := tb.Names(), []string{"Qwen/Qwen2.5-Coder-7B", "coder", "embed", "qwen", "qwen2.5-7b-instruct"}; !slices.Equal(got, want) {
		t.Errorf("names %q, want %q", got, want)
	}
	if got := backendNames(tb.Backends()); !slices.Equal(got, []string{"coder", "embed", "llm"}) {
		t.Errorf("backends %q", got)
	}
	for name, addr := range map[string]string{"qwen": "127.0.0.1:8001", "embed": "127.0.0.1:8002", "coder": "[::1]:8003"} {
		if b := tb.Pick(name); b == nil || b.Addr != addr {
			t.Errorf("Pick(%q) = %+v, want the door at %s", name, b, addr)
		}
	}
	if b := tb.Pick("qwen"); string(b.quoted) != `"qwen2.5-7b-instruct"` {
		t.Errorf("an alias rewrites to %s, want the first name", b.quoted)
	}
	if len(tb.Replicas("coder")) != 1 {
		t.Errorf("a name listed twice makes %d replicas", len(tb.Replicas("coder")))
	}
	for _, name := range []string{"batch", "odd", "Qwen", "nope", ""} {
		if tb.Has(name) || tb.Pick(name) != nil {
			t.Errorf("%q is routed", name)
		}
	}
}

// TestPickReplicas: a ready replica with the fewest requests in flight,
// else the one that will be ready first, ties by instance name.
func TestPickReplicas(t *testing.T) {
	for _, tt := range []struct {
		name     string
		found    []Found
		inFlight map[string]int64
		want     string
	}{
		{"the only one", []Found{inst("a", ":1", api.StateRunning, true, "m")}, nil, "a"},
		{"ready ties by name", []Found{inst("b", ":2", api.StateRunning, true, "m"), inst("a", ":1", api.StateRunning, true, "m")}, nil, "a"},
		{"fewest in flight", []Found{inst("a", ":1", api.StateRunning, true, "m"), inst("b", ":2", api.StateRunning, true, "m")},
			map[string]int64{"a": 3, "b": 2}, "b"},
		{"ready beats idle asleep", []Found{inst("a", ":1", api.StateAsleep, false, "m"), inst("b", ":2", api.StateRunning, true, "m")},
			map[string]int64{"b": 50}, "b"},
		{"starting beats asleep", []Found{inst("a", ":1", api.StateAsleep, false, "m"), inst("b", ":2", api.StateStarting, false, "m")}, nil, "b"},
		{"backoff beats waiting", []Found{inst("a", ":1", api.StateWaiting, false, "m"), inst("b", ":2", api.StateBackoff, false, "m")}, nil, "b"},
		{"asleep beats waiting for memory", []Found{inst("a", ":1", api.StateWaiting, false, "m"), inst("b", ":2", api.StateAsleep, false, "m")}, nil, "b"},
		{"waiting beats stopping", []Found{inst("a", ":1", api.StateStopping, false, "m"), inst("b", ":2", api.StateWaiting, false, "m")}, nil, "b"},
		{"anything beats unreachable", []Found{inst("a", ":1", api.StateUnreachable, true, "m"), inst("b", ":2", api.StateFatal, false, "m")}, nil, "b"},
		{"not ready ties by name, in flight aside", []Found{inst("b", ":2", api.StateAsleep, false, "m"), inst("a", ":1", api.StateAsleep, false, "m")},
			map[string]int64{"a": 9}, "a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tb := Build(nil, tt.found)
			for _, b := range tb.Backends() {
				b.inFlight.Store(tt.inFlight[b.Name])
			}
			if got := tb.Pick("m"); got == nil || got.Name != tt.want {
				t.Fatalf("Pick = %v, want %s", got, tt.want)
			}
		})
	}
}

// TestBuildComingAndGoing: a new table keeps the in-flight counts of the
// instances still there (by socket), drops the ones gone, and starts new
// ones at zero; names follow each instance's latest models.
func TestBuildComingAndGoing(t *testing.T) {
	t1 := Build(nil, []Found{inst("a", ":1", api.StateRunning, true, "m"), inst("b", ":2", api.StateRunning, true, "m")})
	t1.Pick("m").inFlight.Add(2) // a
	t2 := Build(t1, []Found{inst("b", ":2", api.StateRunning, true, "m"), inst("c", ":3", api.StateRunning, true, "m", "n")})
	if got := backendNames(t2.Replicas("m")); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("replicas of m %q, want a gone and c come", got)
	}
	if b := t2.Pick("m"); b.Name != "b" || b.InFlight() != 0 {
		t.Fatalf("Pick = %s with %d in flight", b.Name, b.InFlight())
	}
	t2.Pick("m").inFlight.Add(1) // b
	t3 := Build(t2, []Found{inst("b", ":2", api.StateRunning, true, "m"), inst("c", ":3", api.StateRunning, true, "n")})
	if b := t3.Replicas("n")[0]; b.InFlight() != 0 || t3.Replicas("m")[0].InFlight() != 1 {
		t.Fatalf("in flight not carried: b %d c %d", t3.Replicas("m")[0].InFlight(), b.InFlight())
	}
	if got := backendNames(t3.Replicas("m")); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("c still routed for m after it dropped the name: %q", got)
	}
	if got := Build(t3, nil); len(got.Names()) != 0 || len(got.Backends()) != 0 {
		t.Fatalf("every instance gone, table %q", got.Names())
	}
}

// TestBackendState: the door's view is ready while the instance's door
// passes requests, else the instance's own state.
func TestBackendState(t *testing.T) {
	for _, tt := range []struct {
		state string
		ready bool
		want  string
	}{
		{api.StateRunning, true, "ready"},
		{api.StateRunning, false, api.StateRunning},
		{api.StateAsleep, false, api.StateAsleep},
		{api.StateWaiting, false, api.StateWaiting},
		{api.StateUnreachable, true, api.StateUnreachable},
	} {
		b := Build(nil, []Found{inst("a", ":1", tt.state, tt.ready)}).Pick("a")
		if got := b.State(); got != tt.want {
			t.Errorf("state %s ready %v: %q, want %q", tt.state, tt.ready, got, tt.want)
		}
	}
}

// TestUpstreamPath: /upstream/MODEL/PATH, with a name containing "/"
// either escaped or, unescaped, the longest declared name the path spells.
func TestUpstreamPath(t *testing.T) {
	tb := Build(nil, []Found{
		inst("a", ":1", api.StateRunning, true, "m"),
		inst("b", ":2", api.StateRunning, true, "org/model", "org"),
		inst("c", ":3", api.StateRunning, true, "org/model/v2"),
	})
	for _, tt := range []struct {
		path, model, rest string
		ok                bool
	}{
		{"/upstream/m/v1/chat", "m", "/v1/chat", true},
		{"/upstream/m", "m", "/", true},
		{"/upstream/m/", "m", "/", true},
		{"/upstream/m/a%2Fb/c", "m", "/a%2Fb/c", true},
		{"/upstream/org/model/health", "org/model", "/health", true},
		{"/upstream/org/model/v2/health", "org/model/v2", "/health", true},
		{"/upstream/org/other", "org", "/other", true},
		{"/upstream/org%2Fmodel/health", "org/model", "/health", true},
		{"/upstream/org%2fmodel%2Fv2/x", "org/model/v2", "/x", true},
		{"/upstream/org%2Fnope/x", "org/nope", "", false},
		{"/upstream/nope/x", "nope", "", false},
		{"/upstream/", "", "", false},
	} {
		model, rest, ok := tb.Upstream(tt.path)
		if model != tt.model || ok != tt.ok || ok && rest != tt.rest {
			t.Errorf("Upstream(%q) = %q %q %v, want %q %q %v", tt.path, model, rest, ok, tt.model, tt.rest, tt.ok)
		}
	}
}

// TestDialAddr: a wildcard listen address is reached on loopback.
func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8001": "127.0.0.1:8001", ":8001": "127.0.0.1:8001", "0.0.0.0:8001": "127.0.0.1:8001",
		"[::]:8001": "[::1]:8001", "localhost:8001": "localhost:8001", "10.0.0.5:80": "10.0.0.5:80",
		"[fe80::1]:9": "[fe80::1]:9", "": "", "8001": "", "host:": "",
	} {
		if got, _ := dialAddr(in); got != want {
			t.Errorf("dialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
