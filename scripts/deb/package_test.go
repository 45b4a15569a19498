package deb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the checkout this package sits in (scripts/deb).
const repoRoot = "../.."

const (
	unitPath          = "usr/lib/systemd/system/gpuguard@.service"
	reviewServicePath = "usr/lib/systemd/system/gpuguard-review@.service"
	reviewTimerPath   = "usr/lib/systemd/system/gpuguard-review@.timer"
	doorServicePath   = "usr/lib/systemd/system/gpuguard-door.service"
)

// pkg is a built package, unpacked: root is what dpkg installs, control
// what it keeps in /var/lib/dpkg/info.
type pkg struct {
	deb, version, root, control string
}

// buildPackage runs scripts/package.sh (or takes the package GPUGUARD_DEB
// names, to check one built before: `GPUGUARD_DEB=dist/gpuguard_..._amd64.deb
// go test ./scripts/deb`) and unpacks it with dpkg-deb. The build runs with
// -buildvcs=false, as some Go environments do, so that only the stamp can
// give the binary its version.
func buildPackage(t *testing.T) pkg {
	t.Helper()
	for _, tool := range []string{"git", "dpkg-deb", "dpkg-shlibdeps", "dpkg-buildflags", "strip", "gzip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: cannot build the Debian package (apt install dpkg-dev binutils)", tool)
		}
	}
	p := pkg{deb: os.Getenv("GPUGUARD_DEB")}
	if p.deb == "" {
		if testing.Short() {
			t.Skip("-short: not building the Debian package")
		}
		c := exec.Command("bash", "scripts/package.sh")
		c.Dir = repoRoot
		c.Env = append(os.Environ(), "GPUGUARD_DIST="+t.TempDir(), "GOFLAGS=-buildvcs=false")
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("scripts/package.sh: %v\n%s", err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		p.deb = lines[len(lines)-1]
	} else if !filepath.IsAbs(p.deb) {
		p.deb = filepath.Join(repoRoot, p.deb)
	}
	p.version = run(t, "dpkg-deb", "-f", p.deb, "Version")
	p.root, p.control = t.TempDir(), t.TempDir()
	run(t, "dpkg-deb", "-x", p.deb, p.root)
	run(t, "dpkg-deb", "-e", p.deb, p.control)
	return p
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPackage(t *testing.T) {
	p := buildPackage(t)

	t.Run("name and control fields", func(t *testing.T) {
		if !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`).MatchString(p.version) {
			t.Errorf("version %q is not a Debian native version", p.version)
		}
		arch := run(t, "dpkg-deb", "-f", p.deb, "Architecture")
		if got, want := filepath.Base(p.deb), "gpuguard_"+p.version+"_"+arch+".deb"; got != want {
			t.Errorf("package file %s, want %s", got, want)
		}
		if dpkg, err := exec.LookPath("dpkg"); err == nil {
			if host := run(t, dpkg, "--print-architecture"); arch != host {
				t.Errorf("Architecture %s, this host is %s", arch, host)
			}
		}
		for field, want := range map[string]string{
			"Package": "^gpuguard$", "Section": "^admin$", "Priority": "^optional$",
			"Maintainer": `^.+ <.+@.+>$`, "Depends": `^libc6 \(>= [0-9.]+\)$`,
			"Suggests": "libnvidia-ml1", "Description": "^supervisor ",
			"Installed-Size": "^[0-9]+$",
		} {
			if got := run(t, "dpkg-deb", "-f", p.deb, field); !regexp.MustCompile(want).MatchString(got) {
				t.Errorf("%s: %q does not match %s", field, got, want)
			}
		}
	})

	t.Run("files", func(t *testing.T) {
		want := map[string]fs.FileMode{
			"usr/bin/gpuguard":                                  0o755,
			unitPath:                                            0o644,
			reviewServicePath:                                   0o644,
			reviewTimerPath:                                     0o644,
			doorServicePath:                                     0o644,
			"usr/share/man/man1/gpuguard-door.1.gz":             0o644,
			"etc/gpuguard/example.toml":                         0o644,
			"usr/share/man/man1/gpuguard.1.gz":                  0o644,
			"usr/share/man/man1/gpuguard-run.1.gz":              0o644,
			"usr/share/man/man1/gpuguard-status.1.gz":           0o644,
			"usr/share/man/man1/gpuguard-policy-check.1.gz":     0o644,
			"usr/share/man/man1/gpuguard-report.1.gz":           0o644,
			"usr/share/man/man1/gpuguard-reload.1.gz":           0o644,
			"usr/share/man/man1/gpuguard-version.1.gz":          0o644,
			"usr/share/bash-completion/completions/gpuguard":    0o644,
			"usr/share/zsh/vendor-completions/_gpuguard":        0o644,
			"usr/share/fish/vendor_completions.d/gpuguard.fish": 0o644,
			"usr/share/doc/gpuguard/copyright":                  0o644,
			"usr/share/doc/gpuguard/changelog.gz":               0o644,
			"usr/share/lintian/overrides/gpuguard":              0o644,
		}
		err := filepath.WalkDir(p.root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(p.root, path)
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case d.IsDir():
				if info.Mode().Perm() != 0o755 {
					t.Errorf("%s/: mode %v, want 0755", rel, info.Mode().Perm())
				}
				return nil
			case !info.Mode().IsRegular():
				t.Errorf("%s: not a regular file (%v)", rel, info.Mode())
				return nil
			}
			mode, known := want[rel]
			if !known && strings.HasPrefix(rel, "usr/share/man/man1/gpuguard-") && strings.HasSuffix(rel, ".1.gz") {
				mode, known = 0o644, true // the other commands' pages
			}
			switch {
			case !known:
				t.Errorf("unexpected file %s", rel)
			case info.Mode().Perm() != mode:
				t.Errorf("%s: mode %v, want %v", rel, info.Mode().Perm(), mode)
			}
			delete(want, rel)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for rel := range want {
			t.Errorf("missing %s", rel)
		}
	})

	t.Run("man pages are gzipped troff", func(t *testing.T) {
		pages, _ := filepath.Glob(filepath.Join(p.root, "usr/share/man/man1/*.1.gz"))
		for _, page := range pages {
			if text := gunzip(t, page); !strings.Contains(text, "\n.TH \"GPUGUARD") || !strings.Contains(text, "gpuguard "+p.version) {
				t.Errorf("%s: not a gpuguard %s man page:\n%.200s", filepath.Base(page), p.version, text)
			}
		}
	})

	t.Run("conffiles", func(t *testing.T) {
		if got := strings.Fields(read(t, filepath.Join(p.control, "conffiles"))); len(got) != 1 || got[0] != "/etc/gpuguard/example.toml" {
			t.Errorf("conffiles %q, want [/etc/gpuguard/example.toml]", got)
		}
		if got, want := read(t, filepath.Join(p.root, "etc/gpuguard/example.toml")), read(t, filepath.Join(repoRoot, "examples/policies/vllm.toml")); got != want {
			t.Error("/etc/gpuguard/example.toml differs from examples/policies/vllm.toml")
		}
		for _, script := range []string{"postinst", "prerm", "postrm"} {
			info, err := os.Stat(filepath.Join(p.control, script))
			if err != nil || info.Mode().Perm() != 0o755 {
				t.Errorf("%s: %v %v", script, info, err)
			}
		}
	})

	t.Run("copyright and changelog", func(t *testing.T) {
		c := read(t, filepath.Join(p.root, "usr/share/doc/gpuguard/copyright"))
		if !strings.HasPrefix(c, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") || !strings.Contains(c, "\nLicense: Apache-2.0\n") {
			t.Errorf("copyright is not DEP-5 with the Apache-2.0 license:\n%s", c)
		}
		if cl := gunzip(t, filepath.Join(p.root, "usr/share/doc/gpuguard/changelog.gz")); !strings.HasPrefix(cl, "gpuguard ("+p.version+") ") {
			t.Errorf("changelog does not start with this version:\n%s", cl)
		}
	})

	t.Run("unit runs /usr/bin/gpuguard", func(t *testing.T) {
		src := read(t, filepath.Join(repoRoot, "scripts/systemd/gpuguard@.service"))
		got := read(t, filepath.Join(p.root, unitPath))
		if !strings.Contains(got, "\nExecStart=/usr/bin/gpuguard run --policy /etc/gpuguard/%i.toml") {
			t.Errorf("packaged unit's ExecStart does not run /usr/bin/gpuguard:\n%s", got)
		}
		if !strings.Contains(got, "\nExecReload=/usr/bin/gpuguard reload %i\n") {
			t.Errorf("packaged unit's ExecReload does not run /usr/bin/gpuguard reload %%i:\n%s", got)
		}
		// The packaged unit is the source unit with only that path changed.
		if want := withDirectivePath(src, "/usr/local/bin/gpuguard", "/usr/bin/gpuguard"); got != want {
			t.Errorf("packaged unit differs from scripts/systemd/gpuguard@.service beyond the binary's path")
		}
		sa, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Skip("systemd-analyze not installed")
		}
		// verify wants an instance and an executable that exists: the
		// unpacked binary stands in for /usr/bin/gpuguard.
		inst := filepath.Join(t.TempDir(), "gpuguard@test.service")
		bin, _ := filepath.Abs(filepath.Join(p.root, "usr/bin/gpuguard"))
		if err := os.WriteFile(inst, []byte(withDirectivePath(got, "/usr/bin/gpuguard", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sa, "verify", inst).CombinedOutput()
		if err != nil || strings.Contains(string(out), "gpuguard@") {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})

	t.Run("review units run /usr/bin/gpuguard", func(t *testing.T) {
		svc := read(t, filepath.Join(p.root, reviewServicePath))
		if !strings.Contains(svc, "\nExecStart=/usr/bin/gpuguard report %i --html /var/lib/gpuguard/%i/review.html\n") {
			t.Errorf("packaged review service's ExecStart:\n%s", svc)
		}
		for _, u := range []string{reviewServicePath, reviewTimerPath} {
			src := read(t, filepath.Join(repoRoot, "scripts/systemd", filepath.Base(u)))
			if got := read(t, filepath.Join(p.root, u)); got != withDirectivePath(src, "/usr/local/bin/gpuguard", "/usr/bin/gpuguard") {
				t.Errorf("packaged %s differs from scripts/systemd beyond the binary's path", filepath.Base(u))
			}
		}
		sa, err := exec.LookPath("systemd-analyze")
		if err != nil {
			t.Skip("systemd-analyze not installed")
		}
		dir := t.TempDir()
		bin, _ := filepath.Abs(filepath.Join(p.root, "usr/bin/gpuguard"))
		var insts []string
		for _, u := range []string{reviewServicePath, reviewTimerPath} {
			inst := filepath.Join(dir, strings.Replace(filepath.Base(u), "@.", "@test.", 1))
			text := withDirectivePath(read(t, filepath.Join(p.root, u)), "/usr/bin/gpuguard", bin)
			if err := os.WriteFile(inst, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			insts = append(insts, inst)
		}
		out, err := exec.Command(sa, append([]string{"verify"}, insts...)...).CombinedOutput()
		if err != nil || strings.Contains(string(out), "gpuguard-review@") {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})

	t.Run("door unit runs /usr/bin/gpuguard door", func(t *testing.T) {
		got := read(t, filepath.Join(p.root, doorServicePath))
		if !strings.Contains(got, "\nExecStart=/usr/bin/gpuguard door\n") || !strings.Contains(got, "\nRestart=on-failure\n") {
			t.Errorf("packaged door service's ExecStart or Restart:\n%s", got)
		}
		src := read(t, filepath.Join(repoRoot, "scripts/systemd", filepath.Base(doorServicePath)))
		if got != withDirectivePath(src, "/usr/local/bin/gpuguard", "/usr/bin/gpuguard") {
			t.Errorf("packaged %s differs from scripts/systemd beyond the binary's path", filepath.Base(doorServicePath))
		}
	})

	t.Run("binary names the package version", func(t *testing.T) {
		bin := filepath.Join(p.root, "usr/bin/gpuguard")
		var info struct {
			Version, Revision string
			Modified          bool
		}
		if err := json.Unmarshal([]byte(run(t, bin, "version", "--json")), &info); err != nil {
			t.Fatal(err)
		}
		if info.Version != p.version {
			t.Errorf("version --json: version %q, want the package's %q", info.Version, p.version)
		}
		if os.Getenv("GPUGUARD_DEB") == "" {
			head := run(t, "git", "-C", repoRoot, "rev-parse", "HEAD")
			if info.Revision != head || info.Modified != strings.HasSuffix(p.version, ".dirty") {
				t.Errorf("version --json: revision %q modified %v, want %q and a modified flag matching %q", info.Revision, info.Modified, head, p.version)
			}
		}
		if text := run(t, bin, "version"); !strings.HasPrefix(text, "gpuguard "+p.version+" ") {
			t.Errorf("version: %q does not name %s", text, p.version)
		}
	})

	t.Run("binary accepts the shipped policy", func(t *testing.T) {
		policy := filepath.Join(p.root, "etc/gpuguard/example.toml")
		if out := run(t, filepath.Join(p.root, "usr/bin/gpuguard"), "policy", "check", policy); !strings.HasPrefix(out, policy+": valid\n") {
			t.Errorf("policy check:\n%s", out)
		}
	})

	t.Run("lintian", func(t *testing.T) {
		lintian, err := exec.LookPath("lintian")
		if err != nil {
			t.Skip("lintian not installed")
		}
		c := exec.Command(lintian, "--fail-on", "error", "--display-info", p.deb)
		var out, stderr bytes.Buffer
		c.Stdout, c.Stderr = &out, &stderr
		err = c.Run()
		tags := out.String()
		if tags == "" {
			tags = "no tags (errors, warnings and info alike)\n"
		}
		t.Logf("lintian %s: %s", filepath.Base(p.deb), tags)
		if err != nil || strings.Contains(out.String(), "\nE: ") || strings.HasPrefix(out.String(), "E: ") {
			t.Errorf("lintian: %v\n%s%s", err, out.String(), stderr.String())
		}
	})
}

// withDirectivePath replaces from with to in the unit's directives, not in
// its comments, as scripts/package.sh does.
func withDirectivePath(unit, from, to string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			line = strings.ReplaceAll(line, from, to)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}
