package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// neverFits is a ladder whose first profile can never fit the default
// 16 GiB simulated GPU; the second always does.
const neverFits = `
name = "alpha"
[watch]
backend = "sim"
[[profile]]
name = "fp16"
needs = "40GiB"
[[profile]]
name = "int8b"
needs = "4GiB"
`

// TestReportNeverFits is issue 27's point 4: an instance whose fp16
// never fits runs in int8b all the time. Its fallback rate (against the
// first profile started) is 0, its degraded rate (against the ladder's
// first) is 1, and the text report warns, naming fp16 (from the fit
// events: it never ran) and int8b; --budget moves
// the line. The run also leaves a watermark record (the child's partial
// minute, closed at its exit), and `report --html` draws it.
func TestReportNeverFits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(neverFits)
	// The child holds 8 GiB of the simulated GPU for a second and a half.
	code, _, stderr := e.run(append([]string{"run", "--policy", pol},
		sh(`echo 8589934592 > "$GPUGUARD_SIM_DIR/0/$$$$"; sleep 1.5`)...))
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "in profile int8b") {
		t.Fatalf("did not start in int8b:\n%s", stderr)
	}
	code, out, stderr := e.run([]string{"report", "alpha", "--state-dir", e.stateDir, "--runtime-dir", e.runDir})
	if code != 0 {
		t.Fatalf("report: exit %d %s", code, stderr)
	}
	wantAll(t, "report", out,
		"fallback rate  0.0% of supervised time below int8b",
		"degraded rate  100.0% of supervised time below fp16",
		"warning: alpha ran below its best profile fp16 100.0% of the time (budget 5.0%), mostly in int8b",
	)
	_, out, _ = e.run([]string{"report", "alpha", "--json", "--budget", "0.5", "--state-dir", e.stateDir, "--runtime-dir", e.runDir})
	var rep struct {
		Fallback float64 `json:"fallback_rate"`
		Degraded float64 `json:"degraded_rate"`
		Budget   float64 `json:"budget"`
		Over     bool    `json:"over_budget"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Fallback != 0 || rep.Degraded != 1 || rep.Budget != 0.5 || !rep.Over {
		t.Errorf("report --json --budget 0.5: %+v\n%s", rep, out)
	}
	_, out, _ = e.run([]string{"report", "alpha", "--budget", "1", "--state-dir", e.stateDir, "--runtime-dir", e.runDir})
	if strings.Contains(out, "warning") {
		t.Errorf("within --budget 1, a warning:\n%s", out)
	}

	var minutes []map[string]any
	for _, ev := range journal(t, e) {
		if ev["event"] == "watermark" {
			minutes = append(minutes, ev)
		}
	}
	if len(minutes) == 0 {
		t.Fatal("no watermark record in the journal")
	}
	m := minutes[len(minutes)-1]
	if m["max"] != 0.5 || m["samples"].(float64) < 1 || !strings.HasPrefix(m["gpu"].(string), "GPU-") ||
		m["high"] != 0.9 || m["critical"] != 0.97 || m["profile"] != "int8b" {
		t.Errorf("watermark record %v", m)
	}

	page := e.path("review.html")
	if code, _, stderr := e.run([]string{"report", "--html", page, "--state-dir", e.stateDir, "--runtime-dir", e.runDir}); code != 0 {
		t.Fatalf("report --html: exit %d %s", code, stderr)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	p := string(html)
	if n := strings.Count(p, `<section class="instance" data-name="alpha">`); n != 1 {
		t.Errorf("%d sections for alpha", n)
	}
	if !regexp.MustCompile(`<path class="band" d="M[^"]+Z"/>`).MatchString(p) || !strings.Contains(p, `<p class="verdict over">alpha ran below`) {
		t.Errorf("the page lacks the watermark band or the verdict:\n%s", p)
	}
	if fi, err := os.Stat(filepath.Join(e.dir, ".review.html")); err == nil {
		t.Errorf("a temporary file was left: %v", fi.Name())
	}
}
