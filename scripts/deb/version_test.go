package deb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scratchRepo is a git repository holding a copy of scripts/package.sh,
// so its version can be derived from states this repository is not in.
type scratchRepo struct {
	t   *testing.T
	dir string
}

// newScratchDir is a temp dir holding scripts/package.sh and no repository.
func newScratchDir(t *testing.T) *scratchRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	r := &scratchRepo{t: t, dir: t.TempDir()}
	script, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "package.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "scripts", "package.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

func newScratchRepo(t *testing.T) *scratchRepo {
	t.Helper()
	r := newScratchDir(t)
	r.git("init", "-q")
	r.commit("first")
	return r
}

func (r *scratchRepo) git(args ...string) string {
	r.t.Helper()
	c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	c.Dir = r.dir
	out, err := c.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *scratchRepo) commit(msg string) {
	r.t.Helper()
	r.write("file", msg)
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

func (r *scratchRepo) write(name, body string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// version runs `package.sh --version` with env added to an environment
// that has no GPUGUARD_VERSION of its own.
func (r *scratchRepo) version(env ...string) (string, error) {
	c := exec.Command("bash", "scripts/package.sh", "--version")
	c.Dir = r.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUGUARD_VERSION=") {
			c.Env = append(c.Env, kv)
		}
	}
	c.Env = append(c.Env, env...)
	out, err := c.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (r *scratchRepo) mustVersion(env ...string) string {
	r.t.Helper()
	v, err := r.version(env...)
	if err != nil {
		r.t.Fatalf("package.sh --version: %v\n%s", err, v)
	}
	return v
}

func TestVersionFromGit(t *testing.T) {
	r := newScratchRepo(t)
	rev := func() string { return r.git("rev-parse", "--short=12", "HEAD") }
	var seen []string
	check := func(what, want string) {
		t.Helper()
		if got := r.mustVersion(); got != want {
			t.Errorf("%s: version %q, want %q", what, got, want)
		}
		seen = append(seen, want)
	}

	r.commit("second")
	check("no tag: commits in HEAD", "0.0.0+git2.g"+rev())
	r.git("tag", "v1.2.0")
	check("tag on HEAD", "1.2.0")
	r.commit("third")
	check("a commit after the tag", "1.2.0+git1.g"+rev())
	r.write("untracked", "x")
	check("an untracked file is not a change", "1.2.0+git1.g"+rev())
	r.write("file", "changed")
	if got, want := r.mustVersion(), "1.2.0+git1.g"+rev()+".dirty"; got != want {
		t.Errorf("uncommitted change: version %q, want %q", got, want)
	}
	r.commit("fourth")
	r.git("tag", "v1.3.0-rc1")
	check("a pre-release tag sorts before its release", "1.3.0~rc1")
	r.commit("fifth")
	r.git("tag", "v1.3.0")
	check("the release", "1.3.0")
	if got := r.mustVersion("GPUGUARD_VERSION=2.0.0+hotfix1"); got != "2.0.0+hotfix1" {
		t.Errorf("GPUGUARD_VERSION=2.0.0+hotfix1: version %q", got)
	}
	seen = append(seen, "2.0.0+hotfix1")

	// Each version must upgrade the one before it, by dpkg's own rules.
	if dpkg, err := exec.LookPath("dpkg"); err == nil {
		for i := 1; i < len(seen); i++ {
			if seen[i] == seen[i-1] {
				continue
			}
			if out, err := exec.Command(dpkg, "--compare-versions", seen[i-1], "lt", seen[i]).CombinedOutput(); err != nil {
				t.Errorf("dpkg does not sort %s before %s: %v %s", seen[i-1], seen[i], err, out)
			}
		}
	}
}

func TestVersionOverrideMustBeDebian(t *testing.T) {
	r := newScratchRepo(t)
	for _, bad := range []string{"v1.0", "1.0-1", "1:1.0", "1.0 beta", "latest"} {
		out, err := r.version("GPUGUARD_VERSION=" + bad)
		if err == nil || !strings.Contains(out, `"`+bad+`" is not a Debian native version`) {
			t.Errorf("GPUGUARD_VERSION=%q: err %v, output %q", bad, err, out)
		}
	}
}

func TestVersionWithoutGit(t *testing.T) {
	r := newScratchDir(t)
	// GIT_CEILING_DIRECTORIES keeps git from finding a repository above
	// the temp dir.
	ceiling := "GIT_CEILING_DIRECTORIES=" + filepath.Dir(r.dir)
	if out, err := r.version(ceiling); err == nil || !strings.Contains(out, "set GPUGUARD_VERSION") {
		t.Errorf("no git: err %v, output %q", err, out)
	}
	if got := r.mustVersion(ceiling, "GPUGUARD_VERSION=0.4.2"); got != "0.4.2" {
		t.Errorf("no git, GPUGUARD_VERSION=0.4.2: %q", got)
	}
}
