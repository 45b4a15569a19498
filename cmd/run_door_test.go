package cmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/frontdoor"
	"github.com/gpuguard/gpuguard/policy"
)

const doorBase = reloadBase + `[serve]
listen   = "127.0.0.1:0"
upstream = "http://127.0.0.1:1"
hold     = "30s"
`

// TestReloadServe: a reload applies [serve] at Commit (not before) and
// refuses a new listen address like a new name, naming the line and key.
func TestReloadServe(t *testing.T) {
	rr, path, cur, _ := reloadRun(t, doorBase, RunOptions{})
	door, err := frontdoor.Open(cur.Serve, frontdoor.Options{Status: func() api.Status { return api.Status{} }, Healthy: func(int) {}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { door.Close() })
	rr.Door = door

	rewrite(t, path, strings.Replace(doorBase, `hold     = "30s"`, `hold     = "5s"`+"\nmax_held = 7", 1))
	rl, err := rr.Load(cur)
	if err != nil {
		t.Fatal(err)
	}
	if rl.Policy.Serve.Hold.String() != "5s" || rl.Policy.Serve.MaxHeld != 7 {
		t.Fatalf("reloaded serve %+v", rl.Policy.Serve)
	}
	if rl.Commit == nil {
		t.Fatal("a changed [serve] has nothing to commit")
	}
	rl.Commit()

	rewrite(t, path, strings.Replace(doorBase, `listen   = "127.0.0.1:0"`, `listen   = "127.0.0.1:9"`, 1))
	_, err = rr.Load(cur)
	var list policy.ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].Key != "serve.listen" || list[0].Line != 11 ||
		!strings.Contains(list[0].Msg, "restart gpuguard") {
		t.Fatalf("a new listen address: %v", err)
	}
}
