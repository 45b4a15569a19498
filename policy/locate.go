package policy

import (
	"sort"
	"strconv"
)

// BurntSushi/toml keeps each key's position to itself (MetaData has no
// Position API, and its internal map conflates the elements of an array of
// tables), so the lines that errors cite come from this small scanner. It
// runs only on text the TOML parser has already accepted, and only when
// there is an error to report; on anything unexpected it stops early, which
// costs line numbers, never correctness.

// maxNesting bounds recursion on arrays nested inside arrays.
const maxNesting = 64

// lineIndex maps each key path to the byte offset where it is written.
type lineIndex struct {
	newlines []int
	offsets  map[string]int
}

// line returns the 1-based line of p or, if p itself was not written (an
// implied default), of its nearest written parent; 0 if none was.
func (x *lineIndex) line(p path) int {
	for n := len(p); n > 0; n-- {
		if off, ok := x.offsets[p[:n].String()]; ok {
			return 1 + sort.SearchInts(x.newlines, off)
		}
	}
	return 0
}

// indexLines scans src for the position of every key.
func indexLines(src []byte) *lineIndex {
	x := &lineIndex{offsets: make(map[string]int)}
	for i, c := range src {
		if c == '\n' {
			x.newlines = append(x.newlines, i)
		}
	}
	s := &scanner{src: src, x: x, arrays: make(map[string]int)}
	s.document()
	return x
}

type scanner struct {
	src    []byte
	i      int
	x      *lineIndex
	arrays map[string]int // array-of-tables path -> elements seen so far
	table  path           // the current [table] or [[array]] element
}

func (s *scanner) record(p path, off int) {
	k := p.String()
	if _, ok := s.x.offsets[k]; !ok {
		s.x.offsets[k] = off
	}
}

func (s *scanner) eof() bool { return s.i >= len(s.src) }

func (s *scanner) peek(n int) byte {
	if s.i+n < len(s.src) {
		return s.src[s.i+n]
	}
	return 0
}

// space skips blanks and, with newlines set, line ends and comments too.
func (s *scanner) space(newlines bool) {
	for !s.eof() {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t':
			s.i++
		case newlines && (c == '\n' || c == '\r'):
			s.i++
		case newlines && c == '#':
			s.skipLine()
		default:
			return
		}
	}
}

func (s *scanner) skipLine() {
	for !s.eof() && s.src[s.i] != '\n' {
		s.i++
	}
}

func (s *scanner) document() {
	for {
		s.space(true)
		if s.eof() {
			return
		}
		start := s.i
		if s.src[s.i] == '[' {
			if !s.header() {
				return
			}
		} else if !s.keyValue(s.table, 0) {
			return
		}
		if s.i <= start {
			return
		}
		s.space(false)
		if !s.eof() && s.src[s.i] == '#' {
			s.skipLine()
		}
	}
}

// header handles "[a.b]" and "[[a.b]]".
func (s *scanner) header() bool {
	start := s.i
	array := s.peek(1) == '['
	s.i++
	if array {
		s.i++
	}
	s.space(false)
	keys, ok := s.key()
	if !ok || len(keys) == 0 {
		return false
	}
	var p path
	for _, k := range keys[:len(keys)-1] {
		p = p.key(k)
		if n, ok := s.arrays[p.String()]; ok {
			p = p.index(n - 1)
		}
		// "[a.b]" defines a too: an unknown a is reported at this line.
		s.record(p, start)
	}
	p = p.key(keys[len(keys)-1])
	if array {
		s.record(p, start)
		n := s.arrays[p.String()]
		s.arrays[p.String()] = n + 1
		p = p.index(n)
	} else if n, ok := s.arrays[p.String()]; ok {
		p = p.index(n - 1)
	}
	s.record(p, start)
	s.table = p
	for !s.eof() && s.src[s.i] != '\n' && s.src[s.i] != '#' {
		s.i++
	}
	return true
}

// keyValue handles "a.b = value" under parent.
func (s *scanner) keyValue(parent path, depth int) bool {
	start := s.i
	keys, ok := s.key()
	if !ok || len(keys) == 0 {
		return false
	}
	s.space(false)
	if s.eof() || s.src[s.i] != '=' {
		return false
	}
	s.i++
	s.space(false)
	p := parent
	for _, k := range keys {
		p = p.key(k)
		s.record(p, start)
	}
	return s.value(p, depth)
}

// key reads a dotted key of bare and quoted segments.
func (s *scanner) key() ([]string, bool) {
	var keys []string
	for {
		s.space(false)
		if s.eof() {
			return keys, false
		}
		var k string
		switch c := s.src[s.i]; {
		case c == '"':
			raw, ok := s.basicString()
			if !ok {
				return keys, false
			}
			k = unescape(raw)
		case c == '\'':
			end := indexByteFrom(s.src, s.i+1, '\'')
			if end < 0 {
				return keys, false
			}
			k = string(s.src[s.i+1 : end])
			s.i = end + 1
		default:
			j := s.i
			for j < len(s.src) && isBareByte(s.src[j]) {
				j++
			}
			if j == s.i {
				return keys, false
			}
			k = string(s.src[s.i:j])
			s.i = j
		}
		keys = append(keys, k)
		s.space(false)
		if s.eof() || s.src[s.i] != '.' {
			return keys, true
		}
		s.i++
	}
}

// value skips one value, recording the keys of inline tables and the
// elements of arrays beneath p.
func (s *scanner) value(p path, depth int) bool {
	if s.eof() || depth > maxNesting {
		return false
	}
	switch s.src[s.i] {
	case '{':
		s.i++
		for {
			s.space(true)
			if s.eof() {
				return false
			}
			if s.src[s.i] == '}' {
				s.i++
				return true
			}
			if !s.keyValue(p, depth+1) {
				return false
			}
			s.space(true)
			if !s.eof() && s.src[s.i] == ',' {
				s.i++
			}
		}
	case '[':
		s.i++
		for n := 0; ; n++ {
			s.space(true)
			if s.eof() {
				return false
			}
			if s.src[s.i] == ']' {
				s.i++
				return true
			}
			s.record(p.index(n), s.i)
			if !s.value(p.index(n), depth+1) {
				return false
			}
			s.space(true)
			if !s.eof() && s.src[s.i] == ',' {
				s.i++
			}
		}
	case '"':
		_, ok := s.basicString()
		return ok
	case '\'':
		return s.literalString()
	default:
		start := s.i
		for !s.eof() {
			c := s.src[s.i]
			if c == ',' || c == ']' || c == '}' || c == '\n' || c == '\r' || c == '#' {
				break
			}
			s.i++
		}
		return s.i > start
	}
}

// basicString reads a "..." or """...""" string and returns its raw body.
func (s *scanner) basicString() (string, bool) {
	delim := 1
	if s.peek(1) == '"' && s.peek(2) == '"' {
		delim = 3
	}
	s.i += delim
	start := s.i
	for !s.eof() {
		switch s.src[s.i] {
		case '\\':
			s.i += 2
			continue
		case '\n':
			if delim == 1 {
				return "", false
			}
		case '"':
			if delim == 1 {
				s.i++
				return string(s.src[start : s.i-1]), true
			}
			if s.peek(1) == '"' && s.peek(2) == '"' {
				// Up to two quotes may end the body: """a"""""
				for k := 0; k < 2 && s.peek(3) == '"'; k++ {
					s.i++
				}
				s.i += 3
				return "", true
			}
		}
		s.i++
	}
	return "", false
}

// literalString reads a literal string, on one line or triple-quoted.
func (s *scanner) literalString() bool {
	if s.peek(1) == '\'' && s.peek(2) == '\'' {
		s.i += 3
		for !s.eof() {
			if s.src[s.i] == '\'' && s.peek(1) == '\'' && s.peek(2) == '\'' {
				for k := 0; k < 2 && s.peek(3) == '\''; k++ {
					s.i++
				}
				s.i += 3
				return true
			}
			s.i++
		}
		return false
	}
	end := indexByteFrom(s.src, s.i+1, '\'')
	if end < 0 {
		return false
	}
	s.i = end + 1
	return true
}

func indexByteFrom(b []byte, from int, c byte) int {
	for j := from; j < len(b); j++ {
		if b[j] == c {
			return j
		}
		if b[j] == '\n' {
			return -1
		}
	}
	return -1
}

func isBareByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// unescape decodes a quoted key's escapes as far as Go's syntax agrees with
// TOML's, which covers every key a policy has a use for.
func unescape(raw string) string {
	if u, err := strconv.Unquote(`"` + raw + `"`); err == nil {
		return u
	}
	return raw
}
