package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestManPageForEveryCommand: each command a user can run has its page,
// named as man(1) looks it up (`man gpuguard-policy-check`), and no page
// is left over from a command that does not exist.
func TestManPageForEveryCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if err := run([]string{"-source", "gpuguard 1.2.3", "-man", dir}, os.Stderr); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		want[strings.ReplaceAll(c.CommandPath(), " ", "-")+".1"] = true
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(commandTree())
	for _, must := range []string{"gpuguard.1", "gpuguard-run.1", "gpuguard-policy-check.1", "gpuguard-version.1", "gpuguard-completion.1"} {
		if !want[must] {
			t.Errorf("the command tree has no %s", must)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !want[e.Name()] {
			t.Errorf("unexpected page %s", e.Name())
		}
		delete(want, e.Name())
	}
	for name := range want {
		t.Errorf("no page %s", name)
	}
	page, err := os.ReadFile(filepath.Join(dir, "gpuguard-run.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`.TH "GPUGUARD-RUN" "1" "Nov 2023" "gpuguard 1.2.3" "gpuguard manual"`, `\fB--policy\fP`} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("gpuguard-run.1 lacks %q", s)
		}
	}
	if bytes.Contains(page, []byte("Auto generated")) {
		t.Error("gpuguard-run.1 has cobra's dated footer")
	}
}

// TestCompletions: the three scripts complete gpuguard through its hidden
// __complete command, and the bash one parses.
func TestCompletions(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"-bash": "gpuguard", "-zsh": "_gpuguard", "-fish": "gpuguard.fish"}
	args := []string{}
	for flag, name := range files {
		args = append(args, flag, filepath.Join(dir, name))
	}
	if err := run(args, os.Stderr); err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("__complete")) {
			t.Errorf("%s does not call gpuguard __complete", name)
		}
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command(bash, "-n", filepath.Join(dir, "gpuguard")).CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v\n%s", err, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"-man"}, {"-man", t.TempDir(), "extra"}, {"-bogus"}} {
		var stderr bytes.Buffer
		if err := run(args, &stderr); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
	if err := run([]string{"-man", filepath.Join(t.TempDir(), "missing")}, os.Stderr); err == nil || !strings.Contains(err.Error(), "man pages") {
		t.Errorf("missing man dir: %v", err)
	}
}
