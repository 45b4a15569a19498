package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runPolicyCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(&IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Getenv: func(string) string { return "" }}, args)
	return code, out.String(), errOut.String()
}

func writePolicy(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyCheckValid(t *testing.T) {
	f := writePolicy(t, t.TempDir(), "p.toml", `name = "llama"
[[profile]]
name = "fp16"
needs = "40GiB"
env = { MAX_BATCH = "32", DTYPE = "float16" }
[[profile]]
name = "int8"
live = true
env = { DTYPE = "int8" }
`)
	code, out, errOut := runPolicyCmd(t, "policy", "check", f)
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		f + ": valid\n",
		"name        llama\n",
		"watermark   low=0.7 high=0.9 critical=0.97",
		"watch       backend=auto interval=200ms, adaptive 20ms..1s scope=device quota=none settle=5s\n",
		"LEVEL  PROFILE  NEEDS   LIVE          ENV\n",
		"0      fp16     40 GiB  no (restart)  DTYPE=float16 MAX_BATCH=32\n",
		"1      int8     -       yes           DTYPE=int8\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicyCheckInvalid(t *testing.T) {
	f := writePolicy(t, t.TempDir(), "bad.toml", `[watch]
interval = "fast"
[watermark]
high = 0.99
`)
	code, out, errOut := runPolicyCmd(t, "policy", "check", f)
	if code != ExitConfig || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	want := f + `:2: watch.interval: invalid duration "fast": use Go syntax such as "10s", "1m30s" or "200ms", or days such as "180d"
` + f + `:4: watermark.high: must be below watermark.critical (0.97), got 0.99
gpuguard: ` + f + `: invalid policy (2 problems)
`
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
}

func TestPolicyCheckSyntaxError(t *testing.T) {
	f := writePolicy(t, t.TempDir(), "bad.toml", "[watch]\nbackend = \n")
	code, _, errOut := runPolicyCmd(t, "policy", "check", f)
	if code != ExitConfig || !strings.HasPrefix(errOut, f+":2: invalid TOML") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestPolicyCheckMissingFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "nope.toml")
	code, _, errOut := runPolicyCmd(t, "policy", "check", f)
	if code != ExitConfig || !strings.Contains(errOut, f+": cannot read policy: no such file or directory") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestPolicyCheckDefaultFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, _ := runPolicyCmd(t, "policy", "check")
	if code != ExitOK || !strings.Contains(out, "no policy.toml in the working directory: showing the built-in defaults") ||
		!strings.Contains(out, "0      default  -      no (restart)  -\n") {
		t.Fatalf("without policy.toml: exit %d\n%s", code, out)
	}
	writePolicy(t, dir, "policy.toml", "name = \"here\"\n")
	code, out, _ = runPolicyCmd(t, "policy", "check")
	if code != ExitOK || !strings.HasPrefix(out, "policy.toml: valid\n") || !strings.Contains(out, "name        here\n") {
		t.Fatalf("with policy.toml: exit %d\n%s", code, out)
	}
	writePolicy(t, dir, "policy.toml", "nme = \"here\"\n")
	code, _, errOut := runPolicyCmd(t, "policy", "check")
	if code != ExitConfig || !strings.Contains(errOut, `policy.toml:1: nme: unknown key (did you mean "name"?)`) {
		t.Fatalf("with a bad policy.toml: exit %d\n%s", code, errOut)
	}
}

func TestPolicyCheckShippedPolicy(t *testing.T) {
	code, out, errOut := runPolicyCmd(t, "policy", "check", filepath.Join("..", "policy.toml"))
	if code != ExitOK || !strings.Contains(out, "ladder (3 profiles") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestPolicyUsage(t *testing.T) {
	for _, args := range [][]string{
		{"policy", "check", "a.toml", "b.toml"},
		{"policy", "check", ""},
		{"policy", "check", "--bogus"},
		{"policy", "bogus"},
	} {
		if code, _, errOut := runPolicyCmd(t, args...); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, ExitUsage, errOut)
		}
	}
	if code, out, _ := runPolicyCmd(t, "policy"); code != ExitOK || !strings.Contains(out, "check") {
		t.Errorf("policy alone: exit %d, output %q", code, out)
	}
}

// TestPolicyCheckWarnsWhenNothingCanFit: with the sim backend (the
// policy's or --backend sim) the simulated GPU's memory is known, and a
// quota is known always; a ladder whose smallest needs exceeds either
// gets a warning (the policy stays valid: exit 0).
func TestPolicyCheckWarnsWhenNothingCanFit(t *testing.T) {
	dir := t.TempDir()
	big := writePolicy(t, dir, "big.toml", "[[profile]]\nname = \"a\"\nneeds = \"40GiB\"\n[[profile]]\nname = \"b\"\nneeds = \"20GiB\"\n")
	simPol := writePolicy(t, dir, "sim.toml", "[watch]\nbackend = \"sim\"\n[[profile]]\nname = \"a\"\nneeds = \"20GiB\"\n")
	quota := writePolicy(t, dir, "quota.toml", "[watch]\nquota = \"8GiB\"\n[[profile]]\nname = \"a\"\nneeds = \"10GiB\"\n")
	for _, tc := range []struct {
		args []string
		want string // "" = no warning
	}{
		{[]string{big}, ""}, // auto: no driver is opened
		{[]string{big, "--backend", "sim"}, "b, needs 20 GiB, more than GPU 0 holds (16 GiB in all); run would exit 75"},
		{[]string{big, "--backend", "sim", "--sim-memory", "24GiB"}, ""},
		{[]string{simPol}, "a, needs 20 GiB, more than GPU 0 holds (16 GiB in all)"},
		{[]string{quota}, "more than the [watch] quota of 8 GiB"},
	} {
		code, _, errOut := runPolicyCmd(t, append([]string{"policy", "check"}, tc.args...)...)
		if code != ExitOK || (tc.want == "") != (errOut == "") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, _ := runPolicyCmd(t, "policy", "check", big, "--backend", "cuda"); code != ExitUsage {
		t.Errorf("--backend cuda: exit %d, want 64", code)
	}
}
