package door

import "bytes"

// maxDepth is the deepest nesting scanJSON accepts, as encoding/json's.
const maxDepth = 10000

// topMembers are the spans (start, end) in a JSON text of its top-level
// "model" and "name" values; a zero end means the key is absent.
type topMembers struct {
	model, name [2]int
}

// scanJSON validates a JSON text in one pass, accepting exactly what
// json.Valid accepts, and finds its top-level "model" and "name" members
// on the way (the last of repeated keys, as encoding/json takes it). It is
// what lets the door route a body without decoding it: a long prompt or an
// image costs one tight loop over its bytes and no allocation.
func scanJSON(b []byte) (topMembers, bool) {
	var top topMembers
	var stackBuf [32]byte
	stack := stackBuf[:0] // the open containers: '{' or '['
	key := -1             // the top-level member being read: 0 model, 1 name, -1 another
	start := 0            // where that member's value starts
	i := 0
	for {
		// A value starts at i.
		i = skipSpace(b, i)
		if i == len(b) {
			return top, false
		}
		if len(stack) == 1 && stack[0] == '{' {
			start = i
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return top, false
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' or ']': empty
				i++
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				var ok bool
				if i, ok = scanKey(b, i, len(stack) == 1, &key); !ok {
					return top, false
				}
			}
			continue
		case c == '"':
			if i = scanString(b, i); i < 0 {
				return top, false
			}
		case c == 't':
			if i = scanLiteral(b, i, "true"); i < 0 {
				return top, false
			}
		case c == 'f':
			if i = scanLiteral(b, i, "false"); i < 0 {
				return top, false
			}
		case c == 'n':
			if i = scanLiteral(b, i, "null"); i < 0 {
				return top, false
			}
		default:
			if i = scanNumber(b, i); i < 0 {
				return top, false
			}
		}
		// A value ended at i: close what it ends, up to the next value.
		for {
			if len(stack) == 1 && stack[0] == '{' {
				switch key {
				case 0:
					top.model = [2]int{start, i}
				case 1:
					top.name = [2]int{start, i}
				}
			}
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return top, i == len(b)
			}
			if i == len(b) {
				return top, false
			}
			open := stack[len(stack)-1]
			if b[i] == open+2 {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			if b[i] != ',' {
				return top, false
			}
			i++
			if open == '{' {
				var ok bool
				if i, ok = scanKey(b, skipSpace(b, i), len(stack) == 1, &key); !ok {
					return top, false
				}
			}
			break
		}
	}
}

// scanKey reads an object's key and its ':' at b[i]; at the top level it
// tells which member follows (0 model, 1 name, -1 another).
func scanKey(b []byte, i int, topLevel bool, key *int) (int, bool) {
	if i == len(b) || b[i] != '"' {
		return i, false
	}
	end := scanString(b, i)
	if end < 0 {
		return i, false
	}
	if topLevel {
		switch raw := b[i+1 : end-1]; {
		case keyIs(raw, "model"):
			*key = 0
		case keyIs(raw, "name"):
			*key = 1
		default:
			*key = -1
		}
	}
	i = skipSpace(b, end)
	if i == len(b) || b[i] != ':' {
		return i, false
	}
	return i + 1, true
}

// plainInString reports whether a JSON string holds c as it is: not the
// quote, not the backslash, not a control character.
func plainInString(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

// scanString returns the index after the string opening at b[i], or -1
// when it is not a valid JSON string.
func scanString(b []byte, i int) int {
	for i++; i < len(b); {
		c := b[i]
		switch {
		case plainInString(c):
			i++
		case c == '"':
			return i + 1
		case c == '\\' && i+1 < len(b):
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control character, or a backslash at the end
			return -1
		}
	}
	return -1
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// scanLiteral returns the index after lit at b[i], or -1.
func scanLiteral(b []byte, i int, lit string) int {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
}

// scanNumber returns the index after the number at b[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
