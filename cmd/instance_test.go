package cmd

import (
	"strings"
	"testing"
)

// instanceCase is one command line run against the instances a test
// serves (step, reload): its exit code, its exact stdout, and a part of its
// stderr.
type instanceCase struct {
	args   []string
	code   int
	out    string
	stderr string
}

// checkInstanceCases runs each case with env. An empty stderr want means
// nothing on stderr, not anything at all.
func checkInstanceCases(t *testing.T, env map[string]string, tests []instanceCase) {
	t.Helper()
	for _, tt := range tests {
		code, out, stderr := statusTestRun(t, env, tt.args...)
		if code != tt.code || out != tt.out || !strings.Contains(stderr, tt.stderr) || (tt.stderr == "") != (stderr == "") {
			t.Errorf("%q: exit %d, out %q, stderr %q; want %d, %q, %q", tt.args, code, out, stderr, tt.code, tt.out, tt.stderr)
		}
	}
}
