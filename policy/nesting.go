package policy

import "fmt"

// maxDepth bounds how deeply arrays and inline tables may nest. A policy
// needs three levels at most ([[profile]] and env = { ... }); the TOML
// parser takes time quadratic in the depth of nested inline tables (a
// 1 MiB file of "{a=" would keep `policy check` busy for hours), so the
// depth is checked before the parser sees the text.
const maxDepth = 32

// checkNesting returns a syntax problem when brackets or braces outside
// strings and comments nest deeper than maxDepth, or a dotted key has more
// than maxDepth parts (the parser and the line scanner both take time
// quadratic in a key's parts). It only counts; the TOML parser judges
// everything else.
func checkNesting(source string, data []byte) *Error {
	// dots counts the separators of the dotted key being read ("a.b.c"
	// or "[a.b.c]"); any of = , { } [ ] or a line end ends it. A value
	// has one dot at most (a float, a time).
	depth, dots, line := 0, 0, 1
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '=', ',':
			dots = 0
		case '.':
			if dots++; dots >= maxDepth {
				return &Error{File: source, Line: line,
					Msg: fmt.Sprintf("invalid TOML: a dotted key of more than %d parts", maxDepth)}
			}
		case '\n':
			line++
			dots = 0
		case '#':
			for i+1 < len(data) && data[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			var nl int
			i, nl = skipString(data, i)
			line += nl
		case '[', '{':
			dots = 0
			if depth++; depth > maxDepth {
				return &Error{File: source, Line: line,
					Msg: fmt.Sprintf("invalid TOML: arrays and tables nested more than %d deep", maxDepth)}
			}
		case ']', '}':
			dots = 0
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

// skipString returns the index of the last byte of the string that opens
// at data[i] and the number of newlines inside it. Basic strings ("...")
// take backslash escapes, literal ones ('...') do not; tripled quotes open
// multi-line strings. An unterminated single-line string ends at the line
// end (the parser rejects it anyway).
func skipString(data []byte, i int) (end, newlines int) {
	q := data[i]
	escapes := q == '"'
	multi := i+2 < len(data) && data[i+1] == q && data[i+2] == q
	if multi {
		i += 2
	}
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '\\' && escapes:
			if i+1 < len(data) && data[i+1] == '\n' {
				newlines++
			}
			i++
		case c == '\n':
			if !multi {
				return i - 1, newlines
			}
			newlines++
		case c == q && !multi:
			return i, newlines
		case c == q && i+2 < len(data) && data[i+1] == q && data[i+2] == q:
			i += 2
			// Up to two more quotes belong to the content ("""a""""").
			for n := 0; n < 2 && i+1 < len(data) && data[i+1] == q; n++ {
				i++
			}
			return i, newlines
		}
	}
	return len(data) - 1, newlines
}
