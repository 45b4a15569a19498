package policy

import (
	"fmt"
	"strings"
)

// problems collects what is wrong with a policy file, each with its key
// and line, and remembers which keys were rejected: a rule over a rejected
// key is skipped, so that one mistake is reported once.
type problems struct {
	file  string
	src   []byte
	lines *lineIndex // built at the first error
	errs  ErrorList
	bad   map[string]bool // paths whose values were rejected
}

func (e *problems) fail(p path, cause error, msg string) {
	if e.lines == nil {
		e.lines = indexLines(e.src)
	}
	e.errs = append(e.errs, &Error{File: e.file, Line: e.lines.line(p), Key: p.String(), Msg: msg, Err: cause})
	e.bad[p.String()] = true
}

func (e *problems) errorf(p path, format string, args ...any) {
	e.fail(p, nil, fmt.Sprintf(format, args...))
}

// usable reports that none of the keys was rejected.
func (e *problems) usable(keys ...path) bool {
	for _, k := range keys {
		if e.bad[k.String()] {
			return false
		}
	}
	return true
}

// blame reports a broken relation between a and b at a if the file sets
// a, else at b: the key the user wrote is the one to fix.
func (e *problems) blame(raw map[string]any, a, b path, msgA, msgB string) {
	if written(raw, a) || !written(raw, b) {
		e.errorf(a, "%s", msgA)
		return
	}
	e.errorf(b, "%s", msgB)
}

func (e *problems) hasErrorUnder(section string) bool {
	for _, err := range e.errs {
		if k := err.Key; k == section || strings.HasPrefix(k, section+".") || strings.HasPrefix(k, section+"[") {
			return true
		}
	}
	return false
}
