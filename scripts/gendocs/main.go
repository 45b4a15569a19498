package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/gpuguard/gpuguard/cmd"
)

// options are gendocs' flags; an empty path skips that output.
type options struct {
	source          string // the man pages' footer, e.g. "gpuguard 0.1.0"
	man             string // directory for gpuguard.1, gpuguard-run.1, ...
	bash, zsh, fish string // completion script files
}

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("gendocs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.source, "source", "gpuguard", `the man pages' source line, e.g. "gpuguard 0.1.0"`)
	fs.StringVar(&o.man, "man", "", "write man pages (section 1) into this existing directory")
	fs.StringVar(&o.bash, "bash", "", "write the bash completion script to this file")
	fs.StringVar(&o.zsh, "zsh", "", "write the zsh completion script to this file")
	fs.StringVar(&o.fish, "fish", "", "write the fish completion script to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.man == "" && o.bash == "" && o.zsh == "" && o.fish == "" {
		return errors.New("nothing to do: give -man, -bash, -zsh or -fish")
	}
	root := commandTree()
	if o.man != "" {
		if err := manPages(root, o.source, o.man); err != nil {
			return fmt.Errorf("writing man pages: %w", err)
		}
	}
	for _, c := range []struct{ path, shell string }{{o.bash, "bash"}, {o.zsh, "zsh"}, {o.fish, "fish"}} {
		if c.path == "" {
			continue
		}
		if err := writeFile(c.path, func(w io.Writer) error { return cmd.WriteCompletion(root, c.shell, w) }); err != nil {
			return fmt.Errorf("writing completion %s: %w", c.path, err)
		}
	}
	return nil
}

// commandTree is gpuguard's command tree as the binary builds it (its
// own `completion` command included), without cobra's "Auto generated ...
// on <date>" footer (dates belong in the header alone, which
// SOURCE_DATE_EPOCH fixes).
func commandTree() *cobra.Command {
	root := cmd.NewRootCmd(&cmd.IO{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard, Getenv: os.Getenv})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return root
}

// manPages writes one page per available command: gpuguard.1,
// gpuguard-run.1, gpuguard-policy-check.1, ...
func manPages(root *cobra.Command, source, dir string) error {
	return doc.GenManTree(root, &doc.GenManHeader{Section: "1", Source: source, Manual: "gpuguard manual"}, dir)
}

func writeFile(path string, gen func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := gen(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
