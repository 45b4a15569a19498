package frontdoor

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
	"github.com/gpuguard/gpuguard/policy"
)

func testServe(listen string) policy.Serve {
	return policy.Serve{Listen: listen, Upstream: "http://127.0.0.1:1", Health: "/health", Hold: time.Second, MaxHeld: 4, Priority: "P1"}
}

func testOptions(t *testing.T) Options {
	return Options{Status: func() api.Status { return api.Status{} }, Healthy: func(int) {}, Requested: func(bool) {}, Logf: t.Logf}
}

// TestNoDoor: without [serve] listen there is no door, and the
// supervisor gets nil interfaces, not interfaces holding a nil pointer.
func TestNoDoor(t *testing.T) {
	d, err := Open(policy.Serve{}, testOptions(t))
	if d != nil || err != nil {
		t.Fatalf("Open without listen = %v %v, want nil nil", d, err)
	}
	if d.Dep() != nil || d.Replayer() != nil {
		t.Error("a nil door gave non-nil interfaces")
	}
	d.Configure(testServe("")) // safe on nil
}

// TestServeUntilClose: the door answers while it serves; Close ends Serve
// and frees the address.
func TestServeUntilClose(t *testing.T) {
	d, err := Open(testServe("127.0.0.1:0"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := d.ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- d.Serve() }()
	resp, err := http.Get("http://" + addr + "/gpuguard/health")
	if err != nil {
		t.Fatalf("the serving door: %v", err)
	}
	resp.Body.Close()
	d.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v after Close, want nil", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is still held after Close: %v", err)
	}
	ln.Close()
}

// TestCloseWithoutServe: a run that fails after the door opened closes it
// without ever serving, and lets go of the address.
func TestCloseWithoutServe(t *testing.T) {
	d, err := Open(testServe("127.0.0.1:0"), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := d.ln.Addr().String()
	d.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is still held: %v", err)
	}
	ln.Close()
}

// TestAddressInUse: a listen address in use fails Open, naming it.
func TestAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Open(testServe(ln.Addr().String()), testOptions(t))
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("Open on an address in use = %v, want an error naming it", err)
	}
}

type deferrer struct{ got []string }

func (d *deferrer) DeferRequest(_ context.Context, payload json.RawMessage, body io.Reader) (string, error) {
	b, _ := io.ReadAll(body)
	d.got = append(d.got, string(payload)+" "+string(b))
	return "t-1", nil
}

// TestQueue: deferring goes through the supervisor; a lookup of an
// unknown ticket is not found, not an error.
func TestQueue(t *testing.T) {
	sup := &deferrer{}
	store, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	q := &Queue{Sup: sup, Store: store}
	if ticket, err := q.Defer(context.Background(), []byte(`{"a":1}`), strings.NewReader("body")); ticket != "t-1" || err != nil || len(sup.got) != 1 || sup.got[0] != `{"a":1} body` {
		t.Errorf("Defer = %q %v (%q), want the supervisor's ticket", ticket, err, sup.got)
	}
	if _, _, ok, err := q.Lookup(context.Background(), "nope"); ok || err != nil {
		t.Errorf("Lookup(unknown) = %v %v, want not found", ok, err)
	}
}

// TestBodyTimeoutsFromEnv: the tests' variable shortens the body bounds;
// unset leaves the contract's; a bad value is an error naming it.
func TestBodyTimeoutsFromEnv(t *testing.T) {
	for _, c := range []struct {
		v    string
		want BodyTimeouts
		bad  bool
	}{
		{"", BodyTimeouts{}, false},
		{"2s,8s", BodyTimeouts{Idle: 2 * time.Second, Total: 8 * time.Second}, false},
		{"2s", BodyTimeouts{}, true},
		{"2s,x", BodyTimeouts{}, true},
		{"0s,8s", BodyTimeouts{}, true},
	} {
		got, err := BodyTimeoutsFromEnv(func(k string) string {
			if k == BodyTimeoutsVar {
				return c.v
			}
			return ""
		})
		if got != c.want || (err != nil) != c.bad || c.bad && !strings.Contains(err.Error(), BodyTimeoutsVar) {
			t.Errorf("%q: %+v %v, want %+v, error %v", c.v, got, err, c.want, c.bad)
		}
	}
}
