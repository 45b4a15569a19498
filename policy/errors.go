package policy

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Error is one problem in a policy file. It names the file, the line (0
// when the problem has no single line, such as an unreadable file) and the
// key, in the form editors jump to:
//
//	policy.toml:12: watermark.high: must be below watermark.critical (0.97), got 0.99
type Error struct {
	File string
	Line int
	Key  string // dotted, with array indices: "profile[1].env.DTYPE"; "" for syntax errors
	Msg  string
	// Err is the underlying cause where there is one (fs.ErrNotExist, an
	// *UnknownVarError, a regexp error), for errors.Is and errors.As.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	file := e.File
	if file == "" {
		file = "policy"
	}
	b.WriteString(file)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(clip(e.Key, maxKeyShown))
		b.WriteString(": ")
	}
	b.WriteString(clip(e.Msg, maxMsgShown))
	return b.String()
}

// A key or message that quotes a huge value from a hostile file is shown
// shortened, keeping its start and its end (where the advice is).
const (
	maxKeyShown = 256
	maxMsgShown = 1024
)

// clip shortens s to about n bytes, cutting the middle at rune boundaries.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n/2, len(s)-n/2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s...(%d bytes)...%s", s[:head], tail-head, s[tail:])
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorList holds every problem found in one policy, ordered by line. Parse
// and Load return a non-empty ErrorList (never a bare *Error), so a caller
// can print them all; errors.As(err, &*Error) finds the first.
type ErrorList []*Error

// maxShown bounds the message of a hostile policy with thousands of
// problems; the list itself keeps them all.
const maxShown = 20

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i == maxShown {
			fmt.Fprintf(&b, "\n... and %d more problems", len(l)-maxShown)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As look at every problem.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sortByLine orders problems as they appear in the file; problems without a
// line (whole-file ones) come first, and ties keep their order of discovery.
func (l ErrorList) sortByLine() {
	sort.SliceStable(l, func(i, j int) bool { return l[i].Line < l[j].Line })
}
