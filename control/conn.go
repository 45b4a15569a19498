package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
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
	wmu  sync.Mutex
	sub  *subscriber   // set once, by the reading goroutine
	done chan struct{} // closed when the reading goroutine ends
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
	if err != nil || !c.s.allowPeer(uid) {
		if err == nil {
			err = fmt.Errorf("permission denied: uid %d may not use this socket", uid)
		}
		c.write(errorLine(nil, err))
		return
	}
	// One buffer a connection, sized so that a full buffer without a
	// newline means the line is too long.
	r := bufio.NewReaderSize(c.nc, MaxLineBytes+1)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			c.write(errorLine(nil, fmt.Errorf("request line longer than %d bytes; closing the connection", MaxLineBytes)))
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
		return c.subscribe(id)
	case TypeOOM:
		b.MarkOOM(req.Detail)
		return c.write(encodeLine(okReply{OK: true, ID: id})) == nil
	case TypeReserve:
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
	c.sub = &subscriber{events: make(chan []byte, c.s.subBuffer), dropped: make(chan struct{})}
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
	c.nc.SetWriteDeadline(time.Now().Add(c.s.writeTimeout))
	_, err := c.nc.Write(line)
	if err != nil {
		c.nc.Close()
	}
	return err
}
