package serve

import (
	"net/http"
	"strconv"
	"time"
)

// countingWriter remembers the status code sent, for the requests metric,
// and sends each write on to the client at once (with flush set): what
// the child has sent is never held back, for an answer of known length
// too (a slow one, or one cut off mid-way, reaches the client as far as
// it came). It flushes with the write itself, so a small answer leaves in
// one system call, headers and body together. Unwrap lets
// http.ResponseController (the proxy's flushes) reach the connection's
// own writer.
type countingWriter struct {
	http.ResponseWriter
	flush  http.Flusher // nil: writes stay buffered until the handler ends
	status int
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	if err == nil && c.flush != nil {
		c.flush.Flush()
	}
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Flush is here as well as through Unwrap: code that type-asserts
// http.Flusher directly still streams.
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) code() int {
	if c.status == 0 {
		return 499 // nothing was sent: the client left
	}
	return c.status
}

func strconvSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

func quote(s string) string { return strconv.Quote(s) }
