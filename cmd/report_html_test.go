package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// TestReportHTML: --html FILE writes the review page of every instance
// (sections by name), of the last 7 days unless --since says otherwise;
// "-" writes it to stdout; a file is replaced, never written through.
func TestReportHTML(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	zero, one := 0, 1
	old := api.Event{Time: ago(8 * 24 * time.Hour), Event: api.EventStepDown, Reason: api.ReasonManual, Profile: "fp16",
		From: "fp16", To: "int8", FromLevel: &zero, ToLevel: &one}
	writeJournal(t, root, "llama", append([]api.Event{old}, llamaEvents()...)...)
	writeJournal(t, root, "embed", api.Event{Time: ago(time.Hour), Event: api.EventStart, Profile: "small"},
		api.Event{Time: ago(time.Minute), Event: api.EventExit, Profile: "small"})
	out := filepath.Join(t.TempDir(), "review.html")
	code, stdout, errOut := runReportCmd(t, root, run, "--html", out)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q: %s", code, stdout, errOut)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	p := string(page)
	ie, il := strings.Index(p, `<section class="instance" data-name="embed"`), strings.Index(p, `<section class="instance" data-name="llama"`)
	if ie < 0 || il < ie {
		t.Fatalf("sections not one per instance by name:\n%s", p)
	}
	// The step-down 8 days ago is outside the default week; the one
	// 30 minutes ago is in it.
	if n := countMarks(p, "stepdown"); n != 1 {
		t.Errorf("%d step-down marks, want 1 (the week's)", n)
	}
	if !strings.Contains(p, `<p class="verdict over">llama ran below its best profile fp16`) {
		t.Errorf("no verdict for llama:\n%s", p)
	}

	// A symlink at FILE is replaced, not followed.
	target := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(target, []byte("keep"), 0o600)
	link := filepath.Join(t.TempDir(), "review.html")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runReportCmd(t, root, run, "llama", "--html", link); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the page was written through a symlink: %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Errorf("the symlink is still there: %v %v", fi, err)
	}

	code, stdout, errOut = runReportCmd(t, root, run, "llama", "--html", "-", "--since", "20m")
	if code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") || strings.Contains(stdout, `data-name="embed"`) {
		t.Fatalf("--html -: exit %d: %s\n%s", code, errOut, stdout)
	}
	if countMarks(stdout, "stepdown") != 0 {
		t.Errorf("--since 20m shows the step-down of 30 minutes ago")
	}
}

// TestReportHTMLErrors: usage errors and an unwritable FILE.
func TestReportHTMLErrors(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	writeJournal(t, root, "llama", llamaEvents()...)
	if code, _, _ := runReportCmd(t, root, run, "llama", "--html", "-", "--json"); code != ExitUsage {
		t.Errorf("--html with --json: exit %d, want %d", code, ExitUsage)
	}
	code, _, errOut := runReportCmd(t, root, run, "llama", "--html", filepath.Join(t.TempDir(), "no", "such", "dir", "r.html"))
	if code != ExitFailure || !strings.Contains(errOut, "writing the review page") {
		t.Errorf("unwritable: exit %d: %s", code, errOut)
	}
}

// TestReportHTMLEmpty: a period with nothing in it still writes a page,
// saying so.
func TestReportHTMLEmpty(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	writeJournal(t, root, "llama", api.Event{Time: ago(30 * 24 * time.Hour), Event: api.EventStart, Profile: "fp16"},
		api.Event{Time: ago(29 * 24 * time.Hour), Event: api.EventExit, Profile: "fp16"})
	code, out, errOut := runReportCmd(t, root, run, "llama", "--html", "-")
	if code != 0 || !strings.Contains(out, "Nothing to show") || !strings.Contains(out, `data-name="llama"`) {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
}

// countMarks counts the timeline marks of one kind, leaving out the
// legend's symbols.
func countMarks(page, kind string) int {
	n := 0
	for _, g := range regexp.MustCompile(`(?s)<g class="marks">.*?</g>`).FindAllString(page, -1) {
		n += strings.Count(g, `<path class="m m-`+kind)
	}
	return n
}
