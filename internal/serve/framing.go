package serve

import (
	"bytes"
	"errors"
)

// Why a message's framing is refused (RFC 9112 §6.3): a recipient that
// frames a message by one header where a peer frames it by the other is
// how a request is smuggled past a proxy, or an answer split.
var (
	errLengthAndChunked = errors.New("both Content-Length and Transfer-Encoding")
	errManyLengths      = errors.New("more than one Content-Length")
	errBadLength        = errors.New("a Content-Length that is not one number")
	errUnseenHead       = errors.New("a request head the door did not see whole")
)

// headScan follows the head of one HTTP/1.1 message as its bytes pass,
// for the framing it declares: net/http parses the head itself, but
// keeps no trace of a Content-Length it dropped in favour of
// Transfer-Encoding. It reads nothing and changes nothing: feed is shown
// the bytes and says where the head ends.
type headScan struct {
	line    [64]byte // the start of the current line: enough for any name and length
	n       int      // the current line's length so far (may pass len(line))
	started bool     // the start line has passed
	done    bool     // the blank line that ends the head has passed

	lengths  int   // Content-Length fields
	chunked  bool  // a Transfer-Encoding field was present
	badLen   bool  // a Content-Length that is not one number
	length   int64 // the Content-Length's value
	status   int   // a response's status code (0 for a request)
	response bool  // the start line is a status line
}

// feed scans b, the next bytes of the head, and answers how many of them
// belong to it: all of b, or fewer once the head has ended (done).
func (h *headScan) feed(b []byte) int {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			h.add(b[i:])
			return len(b)
		}
		h.add(b[i : i+j+1])
		i += j + 1
		h.endLine()
		if h.done {
			return i
		}
	}
	return len(b)
}

func (h *headScan) add(b []byte) {
	if h.n < len(h.line) {
		copy(h.line[h.n:], b)
	}
	h.n += len(b)
}

// endLine classifies the line just ended.
func (h *headScan) endLine() {
	long := h.n > len(h.line)
	l := h.line[:min(h.n, len(h.line))]
	h.n = 0
	if !long {
		l = bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
	}
	switch {
	case len(l) == 0:
		// An empty line ends the head; before the start line it is
		// ignored (RFC 9112 §2.2).
		h.done = h.started
		return
	case !h.started:
		h.started = true
		h.startLine(l)
		return
	case l[0] == ' ' || l[0] == '\t':
		return // a folded continuation: net/http does not take it as a field either
	}
	name, value, ok := bytes.Cut(l, []byte(":"))
	if !ok {
		return
	}
	switch {
	case asciiEqualFold(name, "content-length"):
		h.lengths++
		n, ok := parseLength(value)
		if long || !ok {
			h.badLen = true
		}
		h.length = n
	case asciiEqualFold(name, "transfer-encoding"):
		h.chunked = true
	}
}

// startLine notes a response's status code.
func (h *headScan) startLine(l []byte) {
	rest, ok := bytes.CutPrefix(l, []byte("HTTP/"))
	if !ok {
		return
	}
	h.response = true
	if _, code, ok := bytes.Cut(rest, []byte(" ")); ok && len(code) >= 3 {
		for _, c := range code[:3] {
			if c < '0' || c > '9' {
				return
			}
			h.status = h.status*10 + int(c-'0')
		}
	}
}

// framing is why the head's framing is refused, or nil.
func (h *headScan) framing() error {
	switch {
	case h.lengths > 0 && h.chunked:
		return errLengthAndChunked
	case h.lengths > 1:
		return errManyLengths
	case h.badLen:
		return errBadLength
	}
	return nil
}

// parseLength parses a Content-Length value: digits only, with optional
// whitespace around them, at most 18 of them.
func parseLength(v []byte) (int64, bool) {
	v = bytes.Trim(v, " \t")
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// asciiEqualFold reports whether b is s (lower case) in any case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
