package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func vcs(version, rev, modified string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gpuguard/gpuguard", Version: version}}
	if rev != "" {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.revision", Value: rev})
	}
	if modified != "" {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
	}
	return bi
}

const rev = "29e1ba7c0f3a9d6e5b4c3a2b1c0d9e8f7a6b5c4d"

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bi        *debug.BuildInfo
		stamp     Stamp
		version   string
		revision  string
		modified  bool
		goVersion string
	}{
		{"no build info at all: devel", nil, Stamp{}, Devel, "", false, runtime.Version()},
		{"checkout build: devel with the VCS revision", vcs("(devel)", rev, "true"), Stamp{}, Devel, rev, true, "go1.26.8"},
		{"-buildvcs=false checkout build: devel, no revision", vcs("(devel)", "", ""), Stamp{}, Devel, "", false, "go1.26.8"},
		{"module version recorded by the toolchain", vcs("v0.3.0", rev, "false"), Stamp{}, "v0.3.0", rev, false, "go1.26.8"},
		{"the stamp wins over the module version and VCS settings",
			vcs("v0.0.0-20260101000000-29e1ba7c0f3a+dirty", "0123456789ab", "true"),
			Stamp{Version: "0.1.0+git3.g29e1ba7", Revision: rev, Modified: "false"},
			"0.1.0+git3.g29e1ba7", rev, false, "go1.26.8"},
		{"stamps where the toolchain recorded no VCS settings (-buildvcs=false)",
			vcs("(devel)", "", ""), Stamp{Version: "0.0.0+git117.g29e1ba7.dirty", Revision: rev, Modified: "true"},
			"0.0.0+git117.g29e1ba7.dirty", rev, true, "go1.26.8"},
		{"a version stamp alone keeps the toolchain's revision", vcs("(devel)", rev, "true"),
			Stamp{Version: "1.2.3"}, "1.2.3", rev, true, "go1.26.8"},
		{"a revision stamp brings its own modified flag", vcs("(devel)", "0123456789ab", "true"),
			Stamp{Revision: rev}, Devel, rev, false, "go1.26.8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Resolve(tc.bi, tc.stamp)
			want := Info{Version: tc.version, Revision: tc.revision, Modified: tc.modified,
				Go: tc.goVersion, OS: runtime.GOOS, Arch: runtime.GOARCH}
			if got != want {
				t.Errorf("Resolve = %+v, want %+v", got, want)
			}
		})
	}
}

func TestShortRevision(t *testing.T) {
	for rev, want := range map[string]string{"": "unknown", "abc": "abc", rev: "29e1ba7c0f3a"} {
		if got := (Info{Revision: rev}).ShortRevision(); got != want {
			t.Errorf("ShortRevision(%q) = %q, want %q", rev, got, want)
		}
	}
}

// TestReadUnstamped: a test binary is not stamped, so Read reports what
// the toolchain recorded, never an empty version.
func TestReadUnstamped(t *testing.T) {
	if got := Read(); got.Version == "" || got.Go == "" || got.OS != runtime.GOOS || got.Arch != runtime.GOARCH {
		t.Errorf("Read() = %+v", got)
	}
}
