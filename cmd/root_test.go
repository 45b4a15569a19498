package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// TestUsageErrorsExit64: an unknown command, or completion for a shell it
// does not know, is a usage error like any other, not a success or a
// failure of gpuguard's.
func TestUsageErrorsExit64(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"statsu"}, `did you mean "status"?`},
		{[]string{"completion", "tcsh"}, `unknown shell "tcsh"`},
		{[]string{"completion"}, "want one SHELL"},
	} {
		code, out, errOut := runPolicyCmd(t, c.args...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q (stdout %d bytes); want 64 and %q", c.args, code, errOut, len(out), c.want)
		}
	}
	for _, shell := range shells {
		code, out, errOut := runPolicyCmd(t, "completion", shell)
		if code != ExitOK || !strings.Contains(out, "gpuguard") || errOut != "" {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, code, len(out), errOut)
		}
	}
	if code, out, _ := runPolicyCmd(t); code != ExitOK || !strings.Contains(out, "Usage:") {
		t.Errorf("no arguments: exit %d, want the help and 0", code)
	}
}

// TestVersionFlag: --version prints what `gpuguard version` prints.
func TestVersionFlag(t *testing.T) {
	var a, b bytes.Buffer
	io := func(w *bytes.Buffer) *IO {
		return &IO{In: strings.NewReader(""), Out: w, ErrOut: w, Getenv: func(string) string { return "" }}
	}
	if code := Execute(io(&a), []string{"--version"}); code != 0 {
		t.Fatalf("--version: exit %d: %s", code, a.String())
	}
	if code := Execute(io(&b), []string{"version"}); code != 0 || a.String() != b.String() || !strings.HasPrefix(a.String(), "gpuguard ") {
		t.Errorf("--version %q, version %q", a.String(), b.String())
	}
}
