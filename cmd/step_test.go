package cmd

import (
	"testing"
	"time"
)

func TestStep(t *testing.T) {
	dir := t.TempDir()
	statusTestServe(t, dir, "llama")
	statusTestStale(t, dir, "dead")
	env := map[string]string{"GPUGUARD_RUNTIME_DIR": dir}

	checkInstanceCases(t, env, []instanceCase{
		{[]string{"step", "llama", "up"}, ExitFailure, "", `instance "llama" refused to step up: already at the top end of the ladder (fp16)`},
		{[]string{"step", "llama", "down"}, ExitOK, "int8\n", ""},
		{[]string{"step", "llama", "down", "--runtime-dir", dir}, ExitOK, "int4\n", ""},
		{[]string{"step", "llama", "down"}, ExitFailure, "", "bottom end"},
		{[]string{"step", "llama", "up"}, ExitOK, "int8\n", ""},
		{[]string{"step", "nope", "down"}, ExitFailure, "", `no such instance "nope"`},
		{[]string{"step", "dead", "down"}, ExitFailure, "", `instance "dead" is not running (stale socket`},
		{[]string{"step", "llama"}, ExitUsage, "", "accepts 2 arg(s)"},
		{[]string{"step", "llama", "sideways"}, ExitUsage, "", `direction "sideways": want down or up`},
		{[]string{"step", "../x", "down"}, ExitUsage, "", "invalid instance name"},
		{[]string{"step", "llama", "down", "--timeout", "0s"}, ExitUsage, "", "--timeout must be positive"},
	})
}

func TestStepFlags(t *testing.T) {
	var got *StepOptions
	c := NewCmdStep(&IO{}, func(o *StepOptions) error { got = o; return nil })
	c.SetArgs([]string{"llama", "up", "--runtime-dir", "/r"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Name != "llama" || got.Direction != "up" || got.RuntimeDir != "/r" || got.Timeout != 2*time.Minute {
		t.Errorf("options = %+v", got)
	}
}
