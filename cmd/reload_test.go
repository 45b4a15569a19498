package cmd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

// reloadTestBackend is a statusTestBackend that reloads with a scripted
// result.
type reloadTestBackend struct {
	*statusTestBackend
	changed []string
	err     error
}

func (b *reloadTestBackend) Reload(context.Context) ([]string, error) { return b.changed, b.err }

func TestReload(t *testing.T) {
	dir := t.TempDir()
	problems := policy.ErrorList{
		{File: "/etc/gpuguard/bad.toml", Line: 7, Key: "watermark.high", Msg: "must be below watermark.critical (0.97), got 0.99"},
		{File: "/etc/gpuguard/bad.toml", Line: 1, Key: "name", Msg: `would rename the instance from "bad" to "other"; restart gpuguard to rename it`},
	}
	serveBackend(t, dir, "llama", &reloadTestBackend{statusTestBackend: &statusTestBackend{name: "llama"}, changed: []string{"watermark.high", "profile"}})
	serveBackend(t, dir, "same", &reloadTestBackend{statusTestBackend: &statusTestBackend{name: "same"}})
	serveBackend(t, dir, "bad", &reloadTestBackend{statusTestBackend: &statusTestBackend{name: "bad"}, err: problems})
	serveBackend(t, dir, "ending", &reloadTestBackend{statusTestBackend: &statusTestBackend{name: "ending"}, err: errors.New("instance is shutting down")})
	statusTestStale(t, dir, "dead")
	env := map[string]string{"GPUGUARD_RUNTIME_DIR": dir}

	checkInstanceCases(t, env, []instanceCase{
		{[]string{"reload", "llama"}, ExitOK, "llama: policy reloaded, changed: watermark.high, profile\n", ""},
		{[]string{"reload", "same", "--runtime-dir", dir}, ExitOK, "same: policy reloaded, nothing changed\n", ""},
		{[]string{"reload", "bad"}, ExitConfig, "", "/etc/gpuguard/bad.toml:7: watermark.high: must be below watermark.critical (0.97), got 0.99\n" +
			"/etc/gpuguard/bad.toml:1: name: would rename the instance from \"bad\" to \"other\"; restart gpuguard to rename it\n" +
			"gpuguard: instance \"bad\" kept its policy: 2 problems refused, nothing changed\n"},
		{[]string{"reload", "ending"}, ExitFailure, "", `instance "ending" could not reload its policy: instance is shutting down`},
		{[]string{"reload", "nope"}, ExitFailure, "", `no such instance "nope"`},
		{[]string{"reload", "dead"}, ExitFailure, "", `instance "dead" is not running (stale socket`},
		{[]string{"reload"}, ExitUsage, "", "accepts 1 arg(s)"},
		{[]string{"reload", "a", "b"}, ExitUsage, "", "accepts 1 arg(s)"},
		{[]string{"reload", "../x"}, ExitUsage, "", "invalid instance name"},
		{[]string{"reload", "llama", "--timeout", "0s"}, ExitUsage, "", "--timeout must be positive"},
	})
}

func TestReloadFlags(t *testing.T) {
	var got *ReloadOptions
	c := NewCmdReload(&IO{}, func(o *ReloadOptions) error { got = o; return nil })
	c.SetArgs([]string{"llama", "--runtime-dir", "/r"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Name != "llama" || got.RuntimeDir != "/r" || got.Timeout != 30*time.Second {
		t.Errorf("options = %+v", got)
	}
}
