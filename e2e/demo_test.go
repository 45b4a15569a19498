package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoKeepsToItsTempDir: scripts/demo.sh tells the README's story (a
// live step-down, an OOM restart one profile lower, the report) and writes
// nothing outside the temp dir it removes at the end: not the user's state
// or runtime dirs (the sandbox's HOME and XDG dirs stay empty; as root,
// /run/gpuguard is not created), not the checkout (no __pycache__ from the
// Python client it imports).
func TestDemoKeepsToItsTempDir(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	e := newEnv(t)
	dirs := map[string]string{}
	for _, d := range []string{"HOME", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_STATE_HOME"} {
		dirs[d] = e.path(strings.ToLower(d))
		if err := os.Mkdir(dirs[d], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	pycache, err := filepath.Abs("../clients/python/gpuguard/__pycache__")
	if err != nil {
		t.Fatal(err)
	}
	_, pycacheBefore := os.Stat(pycache)
	_, runBefore := os.Stat("/run/gpuguard")

	cmd := exec.Command("bash", "../scripts/demo.sh")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GPUGUARD_BIN=" + bin, "GORACE=atexit_sleep_ms=0"}
	for k, v := range dirs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	wantAll(t, "the demo's output", string(out), "stepdowns      1", "OOM fallbacks  1", "== gpuguard report demo", "int4")
	for k, d := range dirs {
		if ents, err := os.ReadDir(d); err != nil || len(ents) > 0 {
			t.Errorf("the demo left %v in %s (%s), %v", names(ents), k, d, err)
		}
	}
	if _, err := os.Stat(pycache); os.IsNotExist(pycacheBefore) && err == nil {
		t.Errorf("the demo wrote %s", pycache)
	}
	if _, err := os.Stat("/run/gpuguard"); os.IsNotExist(runBefore) && err == nil {
		t.Error("the demo created /run/gpuguard")
	}
}

func names(ents []os.DirEntry) []string {
	var s []string
	for _, en := range ents {
		s = append(s, en.Name())
	}
	return s
}
