package cmd

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuguard/gpuguard/policy"
)

// The README is the newcomer's first page: these tests hold its Commands
// table and its policy summary to the binary, so that neither can drift
// from what gpuguard does.

// readmeSection is the text of README.md under "## heading", up to the
// next heading of that level.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## "+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	s = s[i+len("\n## "+heading+"\n"):]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

var (
	flagRef    = regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	commandRef = regexp.MustCompile("`gpuguard ([^`]*)`")
)

// readmeCommand finds the command a README cell names ("gpuguard sim set
// [--dir D] ..." is sim set): the leading words that are subcommands.
func readmeCommand(root *cobra.Command, text string) *cobra.Command {
	c := root
	for _, w := range strings.Fields(text) {
		var next *cobra.Command
		for _, sub := range c.Commands() {
			if sub.Name() == w {
				next = sub
			}
		}
		if next == nil {
			break
		}
		c = next
	}
	return c
}

// flagsOf are the flags a user can give c (its own and those it
// inherits), but --help.
func flagsOf(c *cobra.Command) []string {
	var names []string
	add := func(f *pflag.Flag) {
		if f.Name != "help" && !f.Hidden {
			names = append(names, "--"+f.Name)
		}
	}
	c.LocalFlags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	slices.Sort(names)
	return slices.Compact(names)
}

// TestREADMECommands: every command has a row in the README's Commands
// table; every flag a row names exists on its command; and every flag of a
// command is named in its row or in a paragraph of the section that names
// the command (as "`run` flags ..." does).
func TestREADMECommands(t *testing.T) {
	root := NewRootCmd(&IO{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard, Getenv: func(string) string { return "" }})
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	section := readmeSection(t, "Commands")
	var paragraphs []string
	rows := map[*cobra.Command]string{}
	for _, p := range strings.Split(section, "\n\n") {
		if !strings.HasPrefix(strings.TrimSpace(p), "|") {
			paragraphs = append(paragraphs, p)
			continue
		}
		for _, row := range strings.Split(p, "\n") {
			cells := strings.Split(row, " | ")
			if len(cells) < 2 || !strings.Contains(cells[0], "`gpuguard") {
				continue
			}
			var cmds []*cobra.Command
			for _, m := range commandRef.FindAllStringSubmatch(cells[0], -1) {
				cmds = append(cmds, readmeCommand(root, m[1]))
			}
			var known []string
			for _, c := range cmds {
				rows[c] += row
				known = append(known, flagsOf(c)...)
			}
			for _, f := range flagRef.FindAllString(row, -1) {
				if !slices.Contains(known, f) {
					t.Errorf("README's Commands row names %s, which %q does not take:\n%s", f, cmds[0].CommandPath(), row)
				}
			}
		}
	}
	var check func(c *cobra.Command)
	check = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && sub.Name() != "help" {
				check(sub)
			}
		}
		if !c.Runnable() || c == root || c.HasAvailableSubCommands() {
			return // a group (policy, sim) is its subcommands
		}
		row, ok := rows[c]
		if !ok {
			t.Errorf("README's Commands table has no row for %q", c.CommandPath())
			return
		}
		for _, f := range flagsOf(c) {
			if strings.Contains(row, f) {
				continue
			}
			named := false
			for _, p := range paragraphs {
				path := strings.TrimPrefix(c.CommandPath(), "gpuguard ")
				if (strings.Contains(p, "`"+path+"`") || strings.Contains(p, "`gpuguard "+path)) && strings.Contains(p, f) {
					named = true
				}
			}
			if !named {
				t.Errorf("README's Commands section does not name %s of %q (in its row, or a paragraph that names the command)", f, c.CommandPath())
			}
		}
	}
	check(root)
}

// readmeAssign is "key = value" in a summary comment, value a TOML string,
// number or boolean; readmeSaid is "key 0.90" (high 0.90, critical 0.97).
var (
	readmeAssign = regexp.MustCompile(`\b([a-z][a-z_]*)\s*=\s*("[^"]*"|[0-9][0-9.]*\b|true\b|false\b)`)
	readmeSaid   = regexp.MustCompile(`\b([a-z][a-z_]*) ([0-9][0-9.]*)\b`)
	readmeWord   = regexp.MustCompile(`\b[a-z][a-z]*_[a-z_]*\b`)
)

// TestREADMEPolicySummary: the policy summary under "## The policy" shows
// only keys that exist, and any value it gives a key in a section's
// comment (`listen = "..."`, `high 0.90`) is that key's default: the
// resolved policy of that one line is the built-in one. The top lines and
// the [[profile]] are examples; their keys must exist.
func TestREADMEPolicySummary(t *testing.T) {
	section := readmeSection(t, "The policy")
	i := strings.Index(section, "```toml\n")
	if i < 0 {
		t.Fatal(`no toml block under "## The policy"`)
	}
	block := section[i+len("```toml\n"):]
	block = block[:strings.Index(block, "```")]
	parse := func(src string) (*policy.Policy, error) {
		return policy.Parse([]byte(src), "README.md", policy.Backends("auto", "nvml", "drm", "sim", "npu-smi"))
	}
	base, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	// exists reports whether key is one of table's: a value of any type
	// for it is not "unknown key".
	exists := func(table, key string) bool {
		_, err := parse(table + "\n" + key + " = 0\n")
		return err == nil || !strings.Contains(err.Error(), "unknown key")
	}
	table, n := "", 0
	for _, line := range strings.Split(block, "\n") {
		code, comment, _ := strings.Cut(line, "#")
		code = strings.TrimSpace(code)
		switch {
		case strings.HasPrefix(code, "["):
			table = code
		case code != "":
			key, _, _ := strings.Cut(code, "=")
			if key = strings.TrimSpace(key); !exists(table, key) {
				t.Errorf("README's policy summary shows %s %s, which is no key of the policy", table, key)
			}
			n++
		}
		if table == "" || table == "[[profile]]" {
			continue
		}
		for _, m := range readmeWord.FindAllString(comment, -1) {
			if !exists(table, m) {
				t.Errorf("README's policy summary names %s %s, which is no key of the policy", table, m)
			}
		}
		shown := readmeAssign.FindAllStringSubmatch(comment, -1)
		for _, m := range readmeSaid.FindAllStringSubmatch(comment, -1) {
			if exists(table, m[1]) {
				shown = append(shown, m)
			}
		}
		for _, m := range shown {
			key, value := m[1], m[2]
			n++
			p, err := parse(table + "\n" + key + " = " + value + "\n")
			if err != nil {
				t.Errorf("README's policy summary: %s %s = %s: %v", table, key, value, err)
				continue
			}
			if d := policy.Diff(base, p); len(d) > 0 {
				t.Errorf("README's policy summary shows %s %s = %s, which is not the default (differs: %v)", table, key, value, d)
			}
		}
	}
	if n < 10 {
		t.Fatalf("read %d keys from the summary: is the block still there?\n%s", n, block)
	}
}

// TestRunHelpShowsNoDefaultThePolicyOverrides: run's flags whose value
// the policy sets show no default of their own in --help: a ./policy.toml
// with backend = "sim" wins over "auto".
func TestRunHelpShowsNoDefaultThePolicyOverrides(t *testing.T) {
	c := NewCmdRun(&IO{}, nil)
	for _, name := range []string{"backend", "interval", "metrics-addr", "priority", "name", "policy"} {
		f := c.Flags().Lookup(name)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" {
			t.Errorf("run --%s shows the default %q, which the policy overrides", name, f.DefValue)
		}
	}
}
