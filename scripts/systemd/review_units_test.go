package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	reviewService = "gpuguard-review@.service"
	reviewTimer   = "gpuguard-review@.timer"
)

// TestReviewUnits: the review service writes the instance's page into its
// state dir with the main unit's environment, and the timer runs it weekly,
// catching up after the host was off.
func TestReviewUnits(t *testing.T) {
	svc := directivesOf(t, reviewService)
	for k, v := range map[string]string{
		"Type":           "oneshot",
		"ExecStart":      "/usr/local/bin/gpuguard report %i --html /var/lib/gpuguard/%i/review.html",
		"ReadWritePaths": "-/var/lib/gpuguard",
		"ProtectSystem":  "strict",
	} {
		if got := svc[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: %s = %q, want %q", reviewService, k, got, v)
		}
	}
	main := directives(t)
	if got, want := strings.Join(svc["Environment"], " "), strings.Join(main["Environment"], " "); got != want {
		t.Errorf("%s: Environment %q, want the main unit's %q (the same state and runtime dirs)", reviewService, got, want)
	}
	if _, ok := svc["WantedBy"]; ok {
		t.Errorf("%s is installed by its timer, not on its own", reviewService)
	}
	tm := directivesOf(t, reviewTimer)
	for k, v := range map[string]string{"OnCalendar": "weekly", "Persistent": "true", "WantedBy": "timers.target"} {
		if got := tm[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: %s = %q, want %q", reviewTimer, k, got, v)
		}
	}
	if _, ok := tm["Unit"]; ok {
		t.Errorf("%s names a unit: it must run its own instance of %s", reviewTimer, reviewService)
	}
}

// TestReviewUnitsVerify runs systemd-analyze verify on an instance of the
// timer and of its service (verify needs the service the timer starts, and
// an executable that exists).
func TestReviewUnitsVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuguard")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var insts []string
	for _, u := range []string{reviewService, reviewTimer} {
		text, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		inst := filepath.Join(dir, strings.Replace(u, "@.", "@test.", 1))
		if err := os.WriteFile(inst, []byte(strings.ReplaceAll(string(text), "/usr/local/bin/gpuguard", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst)
	}
	out, err := exec.Command(sa, append([]string{"verify"}, insts...)...).CombinedOutput()
	if err != nil || strings.Contains(string(out), "gpuguard-review@") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
