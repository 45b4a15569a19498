package simdir

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/usage"
)

// query is a Query with no instance running (an empty runtime dir) and
// root as the state root.
func query(t *testing.T, root string, env map[string]string) Query {
	t.Helper()
	getenv := func(k string) string {
		if k == "GPUGUARD_STATE_DIR" {
			return root
		}
		return env[k]
	}
	return Query{RuntimeDir: t.TempDir(), Getenv: getenv, Warn: &bytes.Buffer{}}
}

func mkSimDir(t *testing.T, root, name string) string {
	t.Helper()
	d := filepath.Join(root, name, paths.SimDir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFind: the flag, then $GPUGUARD_SIM_DIR, then the named instance's,
// then the only one under the state root; what only the user can settle
// is a usage error.
func TestFind(t *testing.T) {
	root := t.TempDir()
	q := query(t, root, map[string]string{})
	if _, err := Find(q); !isUsage(err) || !strings.Contains(err.Error(), "no sim dir") {
		t.Errorf("no sim dir anywhere: %v, want a usage error", err)
	}
	a := mkSimDir(t, root, "a")
	if got, err := Find(q); got != a || err != nil {
		t.Errorf("the only sim dir: %q %v, want %q", got, err, a)
	}
	b := mkSimDir(t, root, "b")
	if _, err := Find(q); !isUsage(err) || !strings.Contains(err.Error(), "several") {
		t.Errorf("two sim dirs: %v, want a usage error naming several", err)
	}
	named := q
	named.Name = "b"
	if got, err := Find(named); got != b || err != nil {
		t.Errorf("--name b: %q %v, want %q", got, err, b)
	}
	named.Name = "c"
	if _, err := Find(named); !isUsage(err) || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("--name c without a sim dir: %v, want a usage error naming it", err)
	}
	env := query(t, root, map[string]string{"GPUGUARD_SIM_DIR": "rel"})
	wd, _ := os.Getwd()
	if got, err := Find(env); got != filepath.Join(wd, "rel") || err != nil {
		t.Errorf("$GPUGUARD_SIM_DIR: %q %v, want it absolute", got, err)
	}
	env.Flag = "/x"
	if got, err := Find(env); got != "/x" || err != nil {
		t.Errorf("the flag before the variable: %q %v", got, err)
	}
}

func isUsage(err error) bool {
	var ue *usage.Error
	return errors.As(err, &ue)
}
