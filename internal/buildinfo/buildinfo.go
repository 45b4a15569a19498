package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strconv"
)

// Link-time stamps, set with
//
//	go build -ldflags "-X github.com/gpuguard/gpuguard/internal/buildinfo.stampVersion=0.1.0
//	  -X github.com/gpuguard/gpuguard/internal/buildinfo.stampRevision=<full hash>
//	  -X github.com/gpuguard/gpuguard/internal/buildinfo.stampModified=false"
//
// They are the project's one accepted exception to "no globals": -X can only
// set a package-level string variable, and nothing else survives a build
// whose toolchain records no VCS settings. Only the linker writes them; the
// code reads them once, in Read.
var (
	stampVersion  string
	stampRevision string
	stampModified string // "true" or "false", with stampRevision
)

// Devel is the version of a build that neither was stamped nor was built
// as a module dependency at a version (a plain `go build` in a checkout).
const Devel = "devel"

// Info is what `gpuguard version --json` prints.
type Info struct {
	Version  string `json:"version"`
	Revision string `json:"revision"` // "" when unknown
	Modified bool   `json:"modified"` // the tree had uncommitted changes
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// Stamp is what the linker was told (all empty when nothing was stamped).
type Stamp struct {
	Version, Revision, Modified string
}

// Read is this binary's Info.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return Resolve(bi, Stamp{Version: stampVersion, Revision: stampRevision, Modified: stampModified})
}

// Resolve combines the toolchain's build info (nil when there is none) and
// the stamps: a non-empty stamp wins over what the toolchain recorded. The
// revision and the modified flag are taken together from one source, so a
// stamped revision is never paired with another tree's modified flag.
func Resolve(bi *debug.BuildInfo, s Stamp) Info {
	info := Info{Version: Devel, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		if bi.GoVersion != "" {
			info.Go = bi.GoVersion
		}
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				info.Revision = kv.Value
			case "vcs.modified":
				info.Modified = kv.Value == "true"
			}
		}
	}
	if s.Version != "" {
		info.Version = s.Version
	}
	if s.Revision != "" {
		info.Revision = s.Revision
		info.Modified, _ = strconv.ParseBool(s.Modified) // anything else: not known to be modified
	}
	return info
}

// ShortRevision is the first 12 hex digits of the revision, as git and Go's
// pseudo-versions abbreviate it, or "unknown".
func (i Info) ShortRevision() string {
	switch {
	case i.Revision == "":
		return "unknown"
	case len(i.Revision) > 12:
		return i.Revision[:12]
	}
	return i.Revision
}
