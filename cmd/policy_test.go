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
