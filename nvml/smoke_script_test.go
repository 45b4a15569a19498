package nvml

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSmokeScriptReferences guards scripts/gpu-smoke.sh, which runs once,
// on a GPU machine with no Go, from binaries built here: every file it
// (or docs/gpu-validation.md) names exists, every test it selects with
// -test.run is a test of this package (the carried nvml.test), and its
// list of the directories searched for the driver library is
// libraryDirs' on amd64. A renamed example or test would otherwise be
// found only on the GPU machine, and the run wasted.
func TestSmokeScriptReferences(t *testing.T) {
	root := filepath.Join("..")
	script := readText(t, filepath.Join(root, "scripts", "gpu-smoke.sh"))
	docs := readText(t, filepath.Join(root, "docs", "gpu-validation.md"))

	files := regexp.MustCompile(`\b(?:examples|scripts|clients|nvml)/[A-Za-z0-9_./-]+\.(?:py|sh|go)\b`)
	refs := files.FindAllString(script+docs, -1)
	slices.Sort(refs)
	refs = slices.Compact(refs)
	if len(refs) < 4 {
		t.Fatalf("found only %d file references in the script and its docs: %q", len(refs), refs)
	}
	for _, ref := range refs {
		if _, err := os.Stat(filepath.Join(root, ref)); err != nil {
			t.Errorf("gpu-smoke.sh or gpu-validation.md names %s, which does not exist", ref)
		}
	}

	var sources strings.Builder
	tests, _ := filepath.Glob("*_test.go")
	for _, f := range tests {
		sources.WriteString(readText(t, f))
	}
	runs := regexp.MustCompile(`-test\.run '([^']+)'`).FindAllStringSubmatch(script, -1)
	if len(runs) < 2 {
		t.Fatalf("found %d -test.run selections in gpu-smoke.sh, want at least 2", len(runs))
	}
	for _, m := range runs {
		for name := range strings.SplitSeq(m[1], "|") {
			name = strings.Trim(name, "^$")
			if !strings.Contains(sources.String(), "func "+name+"(t *testing.T)") {
				t.Errorf("gpu-smoke.sh runs %s, which is no test of package nvml", name)
			}
		}
	}

	m := regexp.MustCompile(`(?s)\nnvml_dirs=\(([^)]*)\)`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("gpu-smoke.sh has no nvml_dirs=(...) list")
	}
	if got, want := strings.Fields(m[1]), libraryDirs("amd64"); !slices.Equal(got, want) {
		t.Errorf("gpu-smoke.sh searches %q, gpuguard searches %q", got, want)
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
