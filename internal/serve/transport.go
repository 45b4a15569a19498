package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// childIdleTimeout closes a kept connection to the child before the
// child's own keep-alive timeout would (5 s for uvicorn, which vLLM and
// SGLang run, for llama-server and for Node): a request written onto a
// connection the child is closing may have been read, so a POST on it
// could not be sent again.
const childIdleTimeout = 4 * time.Second

// newTransport reaches the child (and the fallback): net/http's
// Transport, with keep-alive connections enough for many concurrent
// clients, no proxy from the environment, no compression of its own
// (bodies pass as they are), and no response timeout (a generation may
// take minutes). Each connection is a childConn, so that an answer's
// framing is checked as it is read.
func newTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &childConn{Conn: c}, nil
		},
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       childIdleTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// newHealthTransport keeps the health checks' connection while the child
// answers on it: a ready child's check every 5 s is then one request on a
// live connection, not a TCP connection set up and torn down (a quarter
// of a calm door instance's CPU time, docs/performance.md). The checks
// that can make a child unready dial afresh, and so tell whether it
// accepts connections now: readiness drops the kept connection at each
// launch, after each failed check, and when a request found the child's
// connection failing (readiness.dropConnection). A child that closes idle
// connections after 5 s (uvicorn, llama-server, Node) races the next
// check: the check reuses the connection when it comes first, and
// net/http sends the GET again on a new connection when the close does.
func newHealthTransport() *http.Transport {
	return &http.Transport{Proxy: nil, DisableCompression: true,
		MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * pollReady,
		DialContext: (&net.Dialer{Timeout: pollTimeout}).DialContext}
}

// errBadAnswer: the child's answer declared a framing the door refuses
// (headScan.framing); the client gets 502 and the connection is closed.
var errBadAnswer = errors.New("the model server's answer is malformed")

// childConn is a connection to the child as the transport reads it. It
// scans the head of each answer to a request of the door's (expect marks
// where one begins: the exchange's GotConn) for the framing it declares:
// net/http's transport takes an answer with both Content-Length and
// Transfer-Encoding by the latter and drops the former, and the door
// passes no such answer on (Door.stamp). Informational answers (1xx) are
// followed by the final one, which is scanned too.
type childConn struct {
	net.Conn

	mu       sync.Mutex
	scanning bool
	scan     headScan
	verdict  error
}

// expect says an answer begins with the next bytes read.
func (c *childConn) expect() {
	c.mu.Lock()
	c.scanning, c.scan, c.verdict = true, headScan{}, nil
	c.mu.Unlock()
}

func (c *childConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.see(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// see scans the bytes read while an answer's head is expected.
func (c *childConn) see(b []byte) {
	for len(b) > 0 && c.scanning {
		b = b[c.scan.feed(b):]
		if !c.scan.done {
			return
		}
		if err := c.scan.framing(); err != nil && c.verdict == nil {
			c.verdict = err
		}
		if c.scan.status >= 100 && c.scan.status < 200 {
			c.scan = headScan{} // the final answer follows
			continue
		}
		c.scanning = false
	}
}

// answerErr is why the framing of the answer last read is refused, or nil.
func (c *childConn) answerErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verdict
}
