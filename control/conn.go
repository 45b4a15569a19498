package control

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// conn is one client connection. Its goroutine reads requests and writes
// their replies; a subscribed connection also has a writer goroutine for
// events. Writes are serialised by wmu and bounded by the write deadline.
type conn struct {
	s    *Server
	nc   *net.UnixConn
	lane bool // admitted over the limit: one request that laneType allows
	wmu  sync.Mutex
	sub  *subscriber // set once, by the reading goroutine
	// taskSub and taskCancel: the connection's task subscription (tasks.go).
	taskSub    int64
	taskCancel func()
	done       chan struct{} // closed when the reading goroutine ends
}

// subscriber is a connection's queue of encoded profile events.
type subscriber struct {
	events  chan []byte
	dropped chan struct{} // closed by Publish when events overflowed
}

func (c *conn) serve(ctx context.Context, b Backend) {
	defer c.nc.Close()
	defer close(c.done)
	uid, err := peerUID(c.nc)
	if err != nil || !c.s.lim.allowPeer(uid) {
		if err == nil {
			err = fmt.Errorf("permission denied: uid %d may not use this socket", uid)
		}
		c.write(errorLine(nil, err))
		return
	}
	if c.lane {
		c.serveLane(ctx, b)
		return
	}
	// One buffer a connection, sized so that a full buffer without a
	// newline means the line is too long (a CRLF ending is not counted).
	r := bufio.NewReaderSize(c.nc, MaxLineBytes+2)
	for {
		line, err := c.readLine(r)
		if errors.Is(err, errLineTooLong) || errors.Is(err, errLineTooSlow) {
			c.write(errorLine(nil, err))
			return
		}
		if len(trimLine(line)) > 0 {
			if !c.handle(ctx, b, trimLine(line)) {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection
		}
	}
}

var (
	errLineTooLong = fmt.Errorf("request line longer than %d bytes; closing the connection", MaxLineBytes)
	errLineTooSlow = errors.New("request line not complete in time; closing the connection")
)

// readLine reads one line, waiting for its first byte as long as it takes
// (an idle connection, a subscriber, may stay open), then for the rest of
// it at most the line timeout: a client that trickles a line without
// ending it holds a connection no longer than that.
func (c *conn) readLine(r *bufio.Reader) ([]byte, error) {
	c.nc.SetReadDeadline(time.Time{})
	if _, err := r.Peek(1); err != nil {
		return nil, err
	}
	c.nc.SetReadDeadline(time.Now().Add(c.s.lim.lineTimeout))
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, errLineTooLong
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("%w (%v)", errLineTooSlow, c.s.lim.lineTimeout)
	}
	if n := len(bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))); n > MaxLineBytes {
		return nil, errLineTooLong
	}
	return line, err
}

// laneType reports whether a request of type typ is answered on a
// connection over the limit: the child's own messages (an OOM must never
// be lost), status (an operator must see a flooded instance), and the
// other tenants' questions (a flooded instance must not stall its GPU's
// decisions).
func laneType(typ string) bool {
	switch typ {
	case TypeStatus, TypeOOM, TypeReady, TypeTenant, TypeTenantStep, TypeTenantDecision, TypeTenantSleep:
		return true
	}
	return false
}

// serveLane answers one request of a connection admitted over the
// connection limit, when laneType says so and it arrives within
// laneTimeout; anything else gets the too-many-connections error. Either
// way the connection then closes.
func (c *conn) serveLane(ctx context.Context, b Backend) {
	full := fmt.Errorf("too many connections (limit %d)", c.s.lim.maxConns)
	c.nc.SetReadDeadline(time.Now().Add(c.s.lim.laneTimeout))
	r := bufio.NewReaderSize(c.nc, MaxLineBytes+2)
	line, err := r.ReadSlice('\n')
	line = trimLine(line)
	if len(line) == 0 || errors.Is(err, bufio.ErrBufferFull) {
		c.write(errorLine(nil, full))
		return
	}
	req, derr := decodeRequest(line)
	if derr != nil || !laneType(req.Type) {
		c.write(errorLine(req.ID, full))
		return
	}
	c.handle(ctx, b, line)
}

// trimLine drops the newline (and a CR, for telnet-style clients) and
// surrounding blanks; a blank line is ignored.
func trimLine(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// handle answers one request; false means the connection is dead.
func (c *conn) handle(ctx context.Context, b Backend, line []byte) bool {
	req, err := decodeRequest(line)
	if err != nil {
		return c.write(errorLine(req.ID, err)) == nil
	}
	id := req.ID
	switch req.Type {
	case TypeStatus:
		st := b.Status()
		if st.GPUs == nil {
			st.GPUs = []api.GPU{}
		}
		return c.write(encodeLine(statusReply{OK: true, ID: id, Status: st})) == nil
	case TypeSubscribe:
		if !c.subscribe(id) {
			return false
		}
		if req.Tasks {
			c.subscribeTasks(b)
		}
		return true
	case TypeDone, TypeFailed:
		return c.handleFinish(ctx, b, req)
	case TypeTaskNote:
		return c.handleNote(ctx, b, req)
	case TypeOOM:
		b.MarkOOM(req.Detail)
		return c.write(encodeLine(okReply{OK: true, ID: id})) == nil
	case TypeReserve:
		if req.Payload != nil {
			if handled, alive := c.handleDefer(ctx, b, req); handled {
				return alive
			}
		}
		d, err := b.Reserve(ctx, req.Reserve)
		if err != nil {
			return c.write(errorLine(id, err)) == nil
		}
		return c.write(encodeLine(reserveReply{OK: true, ID: id, Decision: d.Decision, Lease: d.Lease, Reason: d.Reason})) == nil
	case TypeRelease:
		if err := b.Release(ctx, req.Lease); err != nil {
			return c.write(errorLine(id, err)) == nil
		}
		return c.write(encodeLine(okReply{OK: true, ID: id})) == nil
	case TypeStep:
		p, err := b.Step(ctx, req.Direction)
		if err != nil {
			return c.write(errorLine(id, err)) == nil
		}
		return c.write(encodeLine(stepReply{OK: true, ID: id, Profile: p})) == nil
	case TypeReload:
		return c.handleReload(ctx, b, id)
	}
	if handled, alive := c.handleTenant(ctx, b, req); handled {
		return alive
	}
	return c.write(errorLine(id, fmt.Errorf("unknown request type %q", req.Type))) == nil
}

// subscribe registers the connection before replying, so no event after
// the client sees {"ok":true} is missed, and starts the writer only after
// the reply, so the reply comes first. The connection keeps taking
// requests; their replies and the events share it, told apart by "type".
func (c *conn) subscribe(id []byte) bool {
	if c.sub != nil {
		return c.write(encodeLine(okReply{OK: true, ID: id})) == nil
	}
	c.sub = &subscriber{events: make(chan []byte, c.s.lim.subBuffer), dropped: make(chan struct{})}
	c.s.subscribe(c.sub)
	if c.write(encodeLine(okReply{OK: true, ID: id})) != nil {
		return false
	}
	c.s.wg.Add(1)
	go func() {
		defer c.s.wg.Done()
		c.writeEvents(c.sub)
	}()
	return true
}

func (c *conn) writeEvents(sub *subscriber) {
	for {
		select {
		case ev := <-sub.events:
			if c.write(ev) != nil {
				return
			}
		case <-sub.dropped:
			c.write(errorLine(nil, fmt.Errorf("subscriber fell behind (%d events queued) and was dropped; resubscribe and re-read the state file", cap(sub.events))))
			c.nc.Close()
			return
		case <-c.done:
			return
		}
	}
}

// write sends one line. A peer that does not take it within the write
// timeout is cut off, so it cannot hold this goroutine (or, through it, a
// Backend call) any longer.
func (c *conn) write(line []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(c.s.lim.writeTimeout))
	_, err := c.nc.Write(line)
	if err != nil {
		c.nc.Close()
	}
	return err
}
