package cmd

import (
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
