package cmd

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/internal/buildinfo"
)

func runVersionCmd(t *testing.T, info *buildinfo.Info, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	stdio := &IO{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Getenv: func(string) string { return "" }}
	root := NewRootCmd(stdio)
	// Swap in a version command that describes info instead of this binary.
	for _, c := range root.Commands() {
		if c.Name() == "version" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(NewCmdVersion(stdio, func(o *VersionOptions) error {
		o.Info = info
		return runVersion(o)
	}))
	root.SetArgs(append([]string{"version"}, args...))
	err := root.Execute()
	return exitCode(err), out.String(), errOut.String()
}

var stamped = buildinfo.Info{Version: "0.1.0+git3.g29e1ba7", Revision: "29e1ba7c0f3a9d6e5b4c3a2b1c0d9e8f7a6b5c4d",
	Modified: true, Go: "go1.26.8", OS: "linux", Arch: "amd64"}

func TestVersionText(t *testing.T) {
	for _, tc := range []struct {
		info buildinfo.Info
		want string
	}{
		{stamped, "gpuguard 0.1.0+git3.g29e1ba7 (revision 29e1ba7c0f3a, modified) go1.26.8 linux/amd64\n"},
		{buildinfo.Info{Version: "devel", Go: "go1.26.8", OS: "linux", Arch: "arm64"},
			"gpuguard devel (revision unknown) go1.26.8 linux/arm64\n"},
	} {
		code, out, errOut := runVersionCmd(t, &tc.info)
		if code != ExitOK || errOut != "" || out != tc.want {
			t.Errorf("exit %d, stdout %q, stderr %q; want stdout %q", code, out, errOut, tc.want)
		}
	}
}

// TestVersionJSON pins the shape scripts read: exactly these keys.
func TestVersionJSON(t *testing.T) {
	code, out, errOut := runVersionCmd(t, &stamped, "--json")
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]any{"version": "0.1.0+git3.g29e1ba7", "revision": stamped.Revision, "modified": true,
		"go": "go1.26.8", "os": "linux", "arch": "amd64"}
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
}

// TestVersionThisBinary runs the real command: an unstamped test binary
// still names a version, the Go toolchain and the platform.
func TestVersionThisBinary(t *testing.T) {
	var out bytes.Buffer
	code := Execute(&IO{In: strings.NewReader(""), Out: &out, ErrOut: &out, Getenv: func(string) string { return "" }}, []string{"version", "--json"})
	var info buildinfo.Info
	if err := json.Unmarshal(out.Bytes(), &info); code != ExitOK || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out.String())
	}
	if info.Version == "" || info.Go != runtime.Version() || info.OS != runtime.GOOS || info.Arch != runtime.GOARCH {
		t.Errorf("version --json = %+v", info)
	}
}

func TestVersionUsage(t *testing.T) {
	if code, _, _ := runVersionCmd(t, &stamped, "extra"); code != ExitUsage {
		t.Errorf("version extra: exit %d, want %d", code, ExitUsage)
	}
}
