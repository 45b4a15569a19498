package validate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What every test here shares, made once by TestMain: the gpuguard binary
// built from this checkout and the series its registry exposes.
var (
	repoRoot string // the repository
	kubeRoot string // deploy/kubernetes
	gpuguard string // the binary
	exported Series
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gpuguard-validate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := setup(dir); err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	return m.Run()
}

func setup(dir string) error {
	var err error
	if repoRoot, err = filepath.Abs("../../.."); err != nil {
		return err
	}
	kubeRoot = filepath.Join(repoRoot, "deploy", "kubernetes")
	// The binary as the image builds it: cgo on (deploy/container/Dockerfile),
	// or that build made before, as GPUGUARD_BIN names it (scripts/test.sh
	// builds one for every package).
	if gpuguard = os.Getenv("GPUGUARD_BIN"); gpuguard == "" {
		gpuguard = filepath.Join(dir, "gpuguard")
		if err := goCmd(nil, "build", "-o", gpuguard, "."); err != nil {
			return err
		}
	}
	// The series, from the root module's registry (deploy/series_test.go).
	out := filepath.Join(dir, "series.json")
	if err := goCmd([]string{"GPUGUARD_SERIES_OUT=" + out}, "test", "-count=1", "-run", "^TestExportSeries$", "./deploy"); err != nil {
		return err
	}
	exported, err = LoadSeries(out)
	return err
}

// goCmd runs the go command in the repository root, which is another
// module: GOFLAGS=-mod=... and GOWORK meant for this one must not leak in.
func goCmd(env []string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=1", "GOWORK=off"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
