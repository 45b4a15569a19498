package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape is s with every character that can drive a terminal written as
// an escape, as Go writes it in a string literal: the C0 controls and DEL
// as \a, \b, \t, \n, \v, \f, \r or \xNN (ESC is \x1b), the C1 controls
// and the other characters that are not graphic (bidirectional overrides,
// line and paragraph separators) as \uNNNN, and a byte that is not UTF-8
// as \xNN. Every other character, backslashes included, is kept, so
// that a path or a message reads as it was; s without any such character
// is returned as it is, with no copy.
func Escape(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if safe(r) && (r != utf8.RuneError || size > 1) {
			b.WriteString(s[i : i+size])
		} else {
			// strconv writes each of them as Escape's doc says: \a ... \r,
			// \xNN for another C0 control, DEL or a byte that is not UTF-8,
			// \uNNNN for the rest.
			q := strconv.QuoteToASCII(s[i : i+size])
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe is the index of the first byte of s that Escape changes, or
// -1: a scan of plain ASCII takes no decoding.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !safe(r) {
			return i
		}
		i += size
	}
	return -1
}

// safe reports whether r is printed as it is.
func safe(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 0x20 && r != 0x7f
	}
	return unicode.IsGraphic(r)
}
