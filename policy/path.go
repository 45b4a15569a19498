package policy

import (
	"strconv"
	"strings"
)

// path names a value in a policy: key segments, with array elements as
// "[n]" segments. Its String form is what errors show: "profile[1].env.DTYPE".
type path []string

func (p path) key(k string) path {
	q := make(path, len(p), len(p)+1)
	copy(q, p)
	return append(q, k)
}

func (p path) index(i int) path {
	q := make(path, len(p), len(p)+1)
	copy(q, p)
	return append(q, "["+strconv.Itoa(i)+"]")
}

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		if isIndexSeg(s) {
			b.WriteString(s)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(s) {
			b.WriteString(s)
		} else {
			b.WriteString(strconv.Quote(s))
		}
	}
	return b.String()
}

func isIndexSeg(s string) bool {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' {
		return false
	}
	for _, c := range s[1 : len(s)-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isBareKey reports whether TOML lets k stand unquoted.
func isBareKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
