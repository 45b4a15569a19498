package review

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func render(t *testing.T, insts []Instance, o Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, insts, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./review -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("the page differs from %s (go test ./review -update rewrites it; review the diff):\n%s", path, firstDiff(string(want), got))
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n- " + clip(wl, 300) + "\n+ " + clip(gl, 300)
		}
	}
	return ""
}

func fixedPage(t *testing.T) string {
	return render(t, []Instance{instance(betaEvents(), true), instance(hostileEvents(), false), instance(alphaEvents(), false)},
		fixedOptions())
}

// TestGoldenPage: the page of fixed journals, byte for byte: the times,
// the marks with their titles, the figures and the verdicts.
func TestGoldenPage(t *testing.T) {
	golden(t, "page.html", fixedPage(t))
}

// TestGoldenEmpty: a period with nothing in it still makes a page, with
// a section per instance, saying there is nothing to show.
func TestGoldenEmpty(t *testing.T) {
	old := []api.Event{{Time: at(-30 * 24 * time.Hour), Name: "old", Event: api.EventStart, Profile: "fp16"},
		{Time: at(-30*24*time.Hour + time.Hour), Name: "old", Event: api.EventExit, Profile: "fp16"}}
	page := render(t, []Instance{instance(old, false)}, fixedOptions())
	if !strings.Contains(page, `<p class="empty">Nothing to show`) || strings.Count(page, `<section class="instance"`) != 1 ||
		strings.Contains(page, "<svg class=\"timeline\"") {
		t.Errorf("empty page:\n%s", page)
	}
	golden(t, "empty.html", page)
}

// TestSectionsByName: one section per instance, ordered by name whatever
// the order given.
func TestSectionsByName(t *testing.T) {
	var names []string
	for _, m := range regexp.MustCompile(`<section class="instance" data-name="([^"]*)"`).FindAllStringSubmatch(fixedPage(t), -1) {
		names = append(names, m[1])
	}
	want := []string{"alpha", "beta", "x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("sections %q, want %q", names, want)
	}
}

// TestHostileNameEscaped: a name, a profile and a detail with markup in
// the journal are text on the page, never markup.
func TestHostileNameEscaped(t *testing.T) {
	page := fixedPage(t)
	for _, bad := range []string{"<script", "<b>fp16", "</title><script"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page contains %q unescaped", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;b&gt;fp16&lt;/b&gt;", "&lt;/title&gt;&lt;script&gt;alert(2)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks the escaped %q", want)
		}
	}
}

// TestMarksMatchEvents: one mark per marked event of the period, of its
// kind; an OOM exit and the restart after it are two.
func TestMarksMatchEvents(t *testing.T) {
	var page string // the marks groups only, not the legend
	for _, m := range regexp.MustCompile(`(?s)<g class="marks">.*?</g>`).FindAllString(fixedPage(t), -1) {
		page += m
	}
	want := map[string]int{}
	for _, evs := range [][]api.Event{alphaEvents(), betaEvents(), hostileEvents()} {
		for _, ev := range evs {
			want[ev.Event]++
		}
	}
	for _, k := range markKinds {
		if got := strings.Count(page, `<path class="m m-`+k.event+`"`) + strings.Count(page, `<path class="m m-`+k.event+` `); got != want[k.event] {
			t.Errorf("%d %s marks, want %d", got, k.event, want[k.event])
		}
	}
	if strings.Count(page, "<title>") != strings.Count(page, "<path ") {
		t.Error("a mark without a title")
	}
	if !strings.Contains(page, "<title>OOM exit in int8 at 2026-11-30 10:20:00 UTC: stderr matched CUDA out of memory</title>") ||
		!strings.Contains(page, "<title>restart (oom) int8 → int4 at 2026-11-30 10:20:01 UTC</title>") {
		t.Error("the OOM exit and its restart lack their titles")
	}
}

// TestSelfContained: nothing on the page is fetched: no URL but data: and
// in-page anchors, no script.
func TestSelfContained(t *testing.T) {
	page := fixedPage(t)
	for _, m := range regexp.MustCompile(`(?i)(?:src|href)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "#") && m[1] != "data:," {
			t.Errorf("a reference to %q", m[1])
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "url(") || strings.Contains(page, "@import") {
		t.Error("the page has a script or loads a style")
	}
}

// TestVerdicts: over the budget the verdict says so and names where the
// instance ran instead; within it, it says that.
func TestVerdicts(t *testing.T) {
	page := fixedPage(t)
	for _, want := range []string{
		`<p class="verdict over">beta ran below its best profile fp16 100.0% of the time (budget 5.0%), mostly in int8:`,
		`<p class="verdict over">alpha ran below its best profile fp16`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q", want)
		}
	}
	ok := render(t, []Instance{instance(alphaEvents()[:2], false)}, fixedOptions())
	if !strings.Contains(ok, `<p class="verdict">alpha ran below its best profile fp16 0.0% of the time, within the budget of 5.0%</p>`) {
		t.Errorf("within budget:\n%s", ok)
	}
}

// TestSharedGPU: instances on one GPU name each other.
func TestSharedGPU(t *testing.T) {
	page := fixedPage(t)
	for _, want := range []string{`GPU GPU-a, shared with <a href="#i-beta">beta</a>`, `GPU GPU-a, shared with <a href="#i-alpha">alpha</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q", want)
		}
	}
}

// TestNoChild: an instance that journaled events but ran no child in the
// period has a timeline with its marks and no profile line (an empty path
// is no picture), and says it had nothing to judge.
func TestNoChild(t *testing.T) {
	evs := []api.Event{{Time: at(time.Minute), Name: "idle", Event: api.EventReload, Profile: "fp16", Changed: []string{}},
		{Time: at(2 * time.Minute), Name: "idle", Event: api.EventGiveUp, Profile: "fp16", Detail: "no profile fits"}}
	page := render(t, []Instance{instance(evs, false)}, fixedOptions())
	if strings.Contains(page, `d=""`) || strings.Contains(page, `class="level"`) {
		t.Errorf("an empty profile line:\n%s", page)
	}
	if !strings.Contains(page, `<path class="m m-reload"`) || !strings.Contains(page, `<path class="m m-giveup"`) ||
		!strings.Contains(page, "idle did not run a child in this period: nothing to judge") {
		t.Errorf("marks or verdict missing:\n%s", page)
	}
}

func TestF1(t *testing.T) {
	for in, want := range map[float64]string{0: "0", -0.04: "0", 1.25: "1.2", 12.96: "13", -3.5: "-3.5", 112: "112"} {
		if got := f1(in); got != want {
			t.Errorf("f1(%v) = %q, want %q", in, got, want)
		}
	}
}
