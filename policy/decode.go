package policy

import (
	"fmt"
	"sort"
	"strings"
)

// The file is decoded into a generic tree and checked by hand against the
// schema below, rather than decoded into tagged structs, so that every
// problem (unknown key, wrong type, bad value) is reported with its line
// in one pass; struct decoding stops at the first type mismatch.

// decoder walks the schema: each table's known keys and what each value
// fills in a Policy. It reads single values through val and reports every
// problem to out; the rules between keys are crossKeys', checked after.
type decoder struct {
	out  *problems
	val  reader
	opts parseOptions
}

func newDecoder(file string, src []byte, opts parseOptions) *decoder {
	out := &problems{file: file, src: src, bad: make(map[string]bool)}
	return &decoder{out: out, val: reader{out: out}, opts: opts}
}

// field is one known key of a table and how to decode its value.
type field struct {
	name   string
	decode func(p path, v any)
}

// table decodes the table v at p with the given fields. others lists every
// table's key names, to suggest where a misplaced key belongs.
func (d *decoder) table(p path, v any, fields []field, others map[string][]string) {
	m, ok := v.(map[string]any)
	if !ok {
		d.out.errorf(p, "must be a table, got %s", describe(v))
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		found := false
		for _, f := range fields {
			if f.name == k {
				f.decode(p.key(k), m[k])
				found = true
				break
			}
		}
		if !found {
			d.out.errorf(p.key(k), "unknown key%s", suggest(k, fields, others))
		}
	}
}

// suggest offers a near-miss among the table's own keys, or names the
// table where the key belongs.
func suggest(k string, fields []field, others map[string][]string) string {
	for _, f := range fields {
		if nearMiss(k, f.name) {
			return fmt.Sprintf(" (did you mean %q?)", f.name)
		}
	}
	tables := make([]string, 0, len(others))
	for t := range others {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, exact := range []bool{true, false} {
		for _, t := range tables {
			for _, n := range others[t] {
				if exact && n != k || !exact && !nearMiss(k, n) || sameFields(fields, others[t]) {
					continue
				}
				switch t {
				case "":
					return fmt.Sprintf(" (%q belongs at the top, before any [section])", n)
				case "profile":
					return fmt.Sprintf(" (%q belongs in a [[profile]] section)", n)
				}
				return fmt.Sprintf(" (did you mean %s.%s? it belongs in the [%s] section)", t, n, t)
			}
		}
	}
	return ""
}

// sameFields reports whether names are those of fields: the table being
// decoded, which the caller has already searched.
func sameFields(fields []field, names []string) bool {
	if len(fields) != len(names) {
		return false
	}
	for i, f := range fields {
		if f.name != names[i] {
			return false
		}
	}
	return true
}

// nearMiss reports a likely typo: an edit distance of at most 2, or of 1 for
// short keys.
func nearMiss(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	limit := 2
	if len(b) <= 4 {
		limit = 1
	}
	if a == b {
		return true
	}
	if abs(len(a)-len(b)) > limit || len(a) > 64 {
		return false
	}
	return editDistance(a, b) <= limit
}

// editDistance is the Damerau-Levenshtein distance of a and b (the
// optimal string alignment form): insertions, deletions, substitutions
// and transpositions of two neighbouring bytes each count as one edit, so
// "hihg" is one edit from "high", as a typist would count it.
func editDistance(a, b string) int {
	// Three rows: a transposition looks two rows back.
	back, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], back[j-2]+1)
			}
		}
		back, prev, cur = prev, cur, back
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
