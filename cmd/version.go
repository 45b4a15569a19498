package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release; builds from a checkout report the module version
// and VCS revision when the toolchain recorded them.
func version() string {
	v := "devel"
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}

// NewCmdVersion prints the version.
func NewCmdVersion(stdio *IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gpuguard's version",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			fmt.Fprintf(stdio.Out, "gpuguard %s %s %s/%s\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
