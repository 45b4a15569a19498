package reload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/policy"
)

// TestReloadDefaultsRefused: an instance that started from the built-in
// defaults has no file to re-read (./policy.toml created since is not it).
func TestReloadDefaultsRefused(t *testing.T) {
	rr := &Reloader{Start: Instance{Policy: policy.Default()}}
	_, err := rr.Load(policy.Default())
	var list policy.ErrorList
	if !errors.As(err, &list) || len(list) != 1 || !strings.Contains(list[0].Error(), "built-in defaults") {
		t.Fatalf("Load: %v", err)
	}
}

const reloadBase = `name = "llama"
command = ["serve", "--batch", "${MAX_BATCH}"]
priority = 5
[watch]
backend = "sim"
interval = "200ms"
[[profile]]
name = "fp16"
env = { MAX_BATCH = "32" }
`

// TestReloadOtherDevices: the devices follow the backend (--devices and
// the *_VISIBLE_DEVICES variables cannot change under a running process),
// but a resolution that watches others anyway is refused like a new
// backend.
func TestReloadOtherDevices(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(path, []byte(reloadBase), 0o644); err != nil {
		t.Fatal(err)
	}
	opt := policy.Backends("auto", "sim")
	pol, err := policy.Load(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	start := Instance{Policy: pol, Name: "llama", NameFrom: "name"}
	rr := &Reloader{Start: start, Parse: []policy.Option{opt}, Resolve: func(p *policy.Policy) (Instance, error) {
		r := start
		r.Policy, r.Devices = p, []string{"1"}
		return r, nil
	}}
	_, err = rr.Load(pol)
	var errs policy.ErrorList
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != "watch.backend" || errs[0].Line != 5 || !strings.Contains(errs[0].Msg, "other devices") {
		t.Fatalf("problems %v", err)
	}
}

// TestResolveErrorIsTheFiles: a resolution's error that is not a
// *policy.Error becomes a problem of the file, and one that is stays as
// it is.
func TestResolveErrorIsTheFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(path, []byte(reloadBase), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(path, policy.Backends("auto", "sim"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("no command"), path + ": no command"},
		{&policy.Error{File: path, Line: 2, Key: "command", Msg: "unknown ${X}"}, path + ":2: command: unknown ${X}"},
	} {
		rr := &Reloader{Start: Instance{Policy: pol}, Parse: []policy.Option{policy.Backends("auto", "sim")},
			Resolve: func(*policy.Policy) (Instance, error) { return Instance{}, tc.err }}
		_, err := rr.Load(pol)
		var errs policy.ErrorList
		if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("Resolve error %v: Load = %v, want %q", tc.err, err, tc.want)
		}
	}
}
