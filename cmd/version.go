package cmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/internal/buildinfo"
)

// VersionOptions is what `gpuguard version` was asked to do.
type VersionOptions struct {
	IO   *IO
	JSON bool
	// Info is the build to describe; nil means this binary's
	// (buildinfo.Read). Tests set it.
	Info *buildinfo.Info
}

// NewCmdVersion builds `gpuguard version`.
func NewCmdVersion(stdio *IO, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: stdio}
	c := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print gpuguard's version, VCS revision and Go version",
		Long: `Print the version, the VCS revision (with "modified" when the tree had
uncommitted changes) and the Go toolchain, OS and architecture.

The version is the one stamped at build time (the Debian package stamps its
own version), else the module version the Go toolchain recorded, else
"devel". The revision is the stamped one, else the toolchain's vcs.revision.`,
		Example: `  gpuguard version
  gpuguard version --json | jq -r .version`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runVersion(opts)
		},
	}
	c.Flags().BoolVar(&opts.JSON, "json", false, "print JSON: version, revision, modified, go, os, arch")
	return c
}

func runVersion(o *VersionOptions) error {
	info := buildinfo.Read()
	if o.Info != nil {
		info = *o.Info
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	return writeVersion(o.IO.Out, info)
}

// writeVersion prints one line:
// gpuguard 0.1.0 (revision 29e1ba7c0f3a, modified) go1.26.8 linux/amd64.
func writeVersion(w io.Writer, info buildinfo.Info) error {
	modified := ""
	if info.Modified {
		modified = ", modified"
	}
	_, err := fmt.Fprintf(w, "gpuguard %s (revision %s%s) %s %s/%s\n",
		info.Version, info.ShortRevision(), modified, info.Go, info.OS, info.Arch)
	return err
}
