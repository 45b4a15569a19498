package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// maxReplyBytes bounds one reply line read by the client; a status with
// many GPUs and processes is far below it.
const maxReplyBytes = 16 << 20

// RemoteError is an {"ok":false,"error":...} reply: the server understood
// the request and refused it.
type RemoteError struct {
	Message string
	// Errors lists the problems of a refused reload, each naming the
	// policy file, line and key; nil for other refusals.
	Errors []string
}

func (e *RemoteError) Error() string { return e.Message }

// Client is a connection to one instance's control socket. Its methods may
// be called from several goroutines; requests on one Client are sent one
// at a time.
type Client struct {
	path string

	mu     sync.Mutex // one request at a time on conn
	conn   net.Conn
	r      *bufio.Reader
	broken error // set when a request was cut short: the reply may still come

	subMu  sync.Mutex
	subs   map[net.Conn]struct{}
	done   chan struct{}
	closed bool
}

// Dial connects to the control socket at socketPath.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	nc, err := dialUnix(ctx, socketPath)
	if err != nil {
		return nil, err
	}
	return &Client{path: socketPath, conn: nc, r: bufio.NewReader(nc), subs: make(map[net.Conn]struct{}), done: make(chan struct{})}, nil
}

func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", path, err)
	}
	return nc, nil
}

// Request sends req (which may carry "id") and returns the reply decoded
// into a map (numbers as float64). An ok:false reply is returned along with
// a *RemoteError, as the typed methods return it (a refused reload's Errors
// included).
func (c *Client) Request(ctx context.Context, req map[string]any) (map[string]any, error) {
	line, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("bad reply from %s: %w", c.path, err)
	}
	return m, replyError(line)
}

// Status asks for the instance's status object.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	line, err := c.call(ctx, map[string]any{"type": TypeStatus})
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(line, &st); err != nil {
		return st, fmt.Errorf("bad status reply from %s: %w", c.path, err)
	}
	return st, nil
}

// Step asks the instance to step "down" or "up" and returns the new
// profile. Past either end of the ladder it returns a *RemoteError.
func (c *Client) Step(ctx context.Context, direction string) (string, error) {
	line, err := c.call(ctx, map[string]any{"type": TypeStep, "direction": direction})
	if err != nil {
		return "", err
	}
	var r stepReply
	if err := json.Unmarshal(line, &r); err != nil {
		return "", fmt.Errorf("bad step reply from %s: %w", c.path, err)
	}
	return r.Profile, nil
}

// call is roundTrip plus the ok check.
func (c *Client) call(ctx context.Context, req any) ([]byte, error) {
	line, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	return line, replyError(line)
}

func replyError(line []byte) error {
	var r struct {
		OK     *bool    `json:"ok"`
		Error  string   `json:"error"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.OK == nil {
		return fmt.Errorf("bad reply: %s", abbrev(string(line)))
	}
	if !*r.OK {
		return &RemoteError{Message: r.Error, Errors: r.Errors}
	}
	return nil
}

func (c *Client) roundTrip(ctx context.Context, req any) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, c.broken
	}
	release := bindDeadline(ctx, c.conn)
	_, err = c.conn.Write(append(b, '\n'))
	var line []byte
	if err == nil {
		line, err = readLine(c.r)
	}
	released := release()
	if err != nil {
		// The reply, if any, may still arrive and would answer the next
		// request: this connection cannot be used again.
		err = withoutAddr(ctxErr(ctx, err))
		c.broken = fmt.Errorf("connection to %s unusable after an earlier error: %w", c.path, err)
		return nil, fmt.Errorf("talking to %s: %w", c.path, err)
	}
	if !released {
		// ctx ended just as the reply came: its deadline may now be stuck.
		c.broken = fmt.Errorf("connection to %s unusable after its context ended: %w", c.path, ctx.Err())
	}
	return line, nil
}

// bindDeadline makes nc's I/O end with ctx: its deadline, and a deadline in
// the past when ctx is cancelled. release resets the deadline and reports
// false if ctx ended meanwhile (the deadline may then be stuck in the past).
func bindDeadline(ctx context.Context, nc net.Conn) (release func() bool) {
	d, _ := ctx.Deadline()
	nc.SetDeadline(d)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	return func() bool {
		if !stop() {
			return false
		}
		nc.SetDeadline(time.Time{})
		return true
	}
}

// ctxErr reports an I/O error caused by ctx as ctx's error: the only
// deadlines on our connections come from ctx, and the socket's deadline can
// fire a moment before ctx's own timer does.
// withoutAddr drops the addresses from a connection's error: the peer
// address of a Unix socket is the path the server bound, a temporary name
// the user never gave (the socket is renamed into place), and the caller
// names the socket anyway.
func withoutAddr(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("%s: %w", op.Op, op.Err)
	}
	return err
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if _, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// readLine reads one newline-terminated line, bounded.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			return bytes.TrimRight(line, "\r\n"), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
		if len(line) > maxReplyBytes {
			return nil, fmt.Errorf("reply longer than %d bytes", maxReplyBytes)
		}
	}
}

// Subscribe opens a second connection to the same socket and subscribes on
// it, so this Client stays free for requests. The channel delivers profile
// events and is closed when ctx ends, the Client is closed, or the server
// ends the subscription (it drops subscribers that fall behind). Cancel ctx
// to stop; an unread channel then holds nothing open.
func (c *Client) Subscribe(ctx context.Context) (<-chan api.ProfileState, error) {
	nc, err := dialUnix(ctx, c.path)
	if err != nil {
		return nil, err
	}
	if !c.track(nc) {
		nc.Close()
		return nil, net.ErrClosed
	}
	r := bufio.NewReader(nc)
	release := bindDeadline(ctx, nc)
	_, err = nc.Write([]byte(`{"type":"subscribe"}` + "\n"))
	var line []byte
	if err == nil {
		line, err = readLine(r)
	}
	if err == nil {
		err = replyError(line)
	}
	if !release() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		err = withoutAddr(ctxErr(ctx, err))
		c.untrack(nc)
		nc.Close()
		return nil, fmt.Errorf("subscribing at %s: %w", c.path, err)
	}
	ch := make(chan api.ProfileState, 16)
	go c.readEvents(ctx, nc, r, ch)
	return ch, nil
}

func (c *Client) readEvents(ctx context.Context, nc net.Conn, r *bufio.Reader, ch chan<- api.ProfileState) {
	defer close(ch)
	defer c.untrack(nc)
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	for {
		line, err := readLine(r)
		if err != nil {
			return
		}
		var ev api.ProfileState
		if json.Unmarshal(line, &ev) != nil || ev.Type != EventProfile {
			if replyError(line) != nil {
				return // the server dropped us, or sent garbage
			}
			continue
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
			return
		case <-c.done:
			return
		}
	}
}

func (c *Client) track(nc net.Conn) bool {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.closed {
		return false
	}
	c.subs[nc] = struct{}{}
	return true
}

func (c *Client) untrack(nc net.Conn) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	delete(c.subs, nc)
}

// Close closes the connection and ends every subscription made through c.
func (c *Client) Close() error {
	c.subMu.Lock()
	if !c.closed {
		c.closed = true
		close(c.done)
		for nc := range c.subs {
			nc.Close()
		}
	}
	c.subMu.Unlock()
	return c.conn.Close()
}
