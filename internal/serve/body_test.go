package serve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawDoorConn is a client connection to the door that writes bytes as
// given.
func rawDoorConn(t *testing.T, fd *frontDoor) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(fd.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// closedErr reports whether a read's error says the door closed the
// connection: its end, or a reset (the client was still sending).
func closedErr(err error) bool {
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
}

// TestBodyTimeouts: a body with no byte for BodyIdle, or not all in
// within BodyTotal, gets 408 and its connection closed. A small body is
// read whole before it is sent, so the child gets nothing of it; of a
// larger one, streamed, the child sees what came cut off. Controls: a
// body that trickles within both bounds passes whole, and an answer that
// streams for longer than BodyIdle after the body is in is not cut.
func TestBodyTimeouts(t *testing.T) {
	const idle, total = 200 * time.Millisecond, time.Second
	got := make(chan string, 8)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			got <- fmt.Sprintf("%s cut after %d bytes", r.URL.Path, len(b))
			return
		}
		got <- fmt.Sprintf("%s whole %d bytes", r.URL.Path, len(b))
		if r.URL.Path == "/long-answer" {
			for i := range 6 {
				fmt.Fprintf(w, "part %d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(idle / 2) // the child's pace, not synchronisation
			}
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true, BodyIdle: idle, BodyTotal: total})
	fd.Profile("fp16", 0, 2)
	fd.launch(t, 1)
	trickle := func(conn net.Conn, body string, every time.Duration) {
		go func() {
			for i := range len(body) {
				time.Sleep(every) // the client's pace
				if _, err := conn.Write([]byte{body[i]}); err != nil {
					return
				}
			}
		}()
	}
	large := maxBuffered + 1
	for _, c := range []struct {
		name      string
		length    int
		first     string        // sent with the head
		trickle   string        // then a byte every every
		every     time.Duration // 0: nothing more
		code      int
		atLeast   time.Duration
		childSees string // "": nothing
	}{
		{"silent", 100, "abc", "", 0, 408, idle, ""},
		{"trickle", 100, "", strings.Repeat("x", 100), idle / 2, 408, total, ""},
		{"silent-streamed", large, strings.Repeat("s", large-10), "", 0, 408, idle, "/silent-streamed cut after "},
		{"trickle-control", 5, "", "hello", idle / 2, 200, 0, "/trickle-control whole 5 bytes"},
		{"long-answer", 5, "hello", "", 0, 200, 0, "/long-answer whole 5 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, br := rawDoorConn(t, fd)
			start := time.Now()
			fmt.Fprintf(conn, "POST /%s HTTP/1.1\r\nHost: door\r\nContent-Length: %d\r\n\r\n%s", c.name, c.length, c.first)
			if c.every > 0 {
				trickle(conn, c.trickle, c.every)
			}
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			took := time.Since(start)
			if err != nil || resp.StatusCode != c.code {
				t.Fatalf("%d %q (%v), want %d", resp.StatusCode, body, err, c.code)
			}
			if took < c.atLeast {
				t.Errorf("answered after %s, before %s", took, c.atLeast)
			}
			if c.code == 408 {
				if !resp.Close || !strings.Contains(string(body), "invalid_request_error") {
					t.Errorf("408 %q, Close %v: want the door's error, closing the connection", body, resp.Close)
				}
				if _, err := br.ReadByte(); !closedErr(err) {
					t.Errorf("after the 408: %v, want the connection closed", err)
				}
			}
			if c.name == "long-answer" && strings.Count(string(body), "part") != 6 {
				t.Errorf("the answer %q was cut", body)
			}
			if c.childSees == "" {
				select {
				case s := <-got:
					t.Errorf("the child saw %q, want nothing", s)
				default:
				}
				return
			}
			select {
			case s := <-got:
				if !strings.HasPrefix(s, c.childSees) {
					t.Errorf("the child saw %q, want %q", s, c.childSees)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("the child saw nothing, want %q", c.childSees)
			}
		})
	}
}

// TestHeldBodyClientLeaves: a POST held with its body unread, whose
// client closes its connection, frees its place at once (net/http, which
// reads nothing of it, cannot tell; the gate watches the connection) and
// never reaches the child. Control: a held POST whose client stays takes
// the freed place and reaches the child whole.
func TestHeldBodyClientLeaves(t *testing.T) {
	reached := make(chan string, 4)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reached <- r.URL.Path + " " + string(b)
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 1, Retry: true})
	post := func(path string) (net.Conn, *bufio.Reader) {
		conn, br := rawDoorConn(t, fd)
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: door\r\nContent-Length: 5\r\n\r\nhello", path)
		return conn, br
	}
	gone, _ := post("/gone")
	fd.waitHeld(t, 1)
	gone.Close()
	fd.waitHeld(t, 0)
	_, br := post("/stays")
	fd.waitHeld(t, 1)
	fd.launch(t, 1)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the control: %v %v", resp, err)
	}
	if got := <-reached; got != "/stays hello" {
		t.Errorf("the child got %q, want the control", got)
	}
	select {
	case got := <-reached:
		t.Errorf("the child got %q", got)
	default:
	}
}

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

// TestTimedBodyDeadlines: each read of the body sets the connection's
// deadline to the idle bound, never past the bound in all; once the body
// has ended no read sets one (net/http's own read of the connection then
// must not time out).
func TestTimedBodyDeadlines(t *testing.T) {
	conn := &deadlineConn{}
	start := time.Now()
	b := &timedBody{src: io.NopCloser(strings.NewReader("abc")), conn: &clientConn{Conn: conn},
		idle: time.Minute, end: start.Add(90 * time.Second)}
	buf := make([]byte, 2)
	for range 4 {
		_, _ = b.Read(buf)
	}
	if len(conn.set) != 3 { // "ab", "c", the end; not the read after it
		t.Fatalf("%d deadlines set, want 3: %v", len(conn.set), conn.set)
	}
	if d := conn.set[0].Sub(start); d < time.Minute || d > time.Minute+time.Second {
		t.Errorf("the first deadline is %s after the start, want the idle minute", d)
	}
	b = &timedBody{src: io.NopCloser(strings.NewReader("abc")), conn: &clientConn{Conn: conn},
		idle: time.Minute, end: start.Add(time.Second)}
	conn.set = nil
	_, _ = b.Read(buf)
	if !conn.set[0].Equal(start.Add(time.Second)) {
		t.Errorf("deadline %v, want the bound in all", conn.set[0])
	}
}

// TestDeferredBodyTimeout: a deferred request's body that stops coming
// gets 408 too, and nothing is stored. Control: the same request whose
// body comes is deferred (202).
func TestDeferredBodyTimeout(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	q := newMemQueue()
	fd := startDoorQueue(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, BodyIdle: 200 * time.Millisecond, BodyTotal: time.Second}, q)
	fd.Profile("fp16", 0, 2)
	fd.launch(t, 1)
	fd.Short(true)
	for _, c := range []struct {
		body string
		code int
	}{{"abc", 408}, {"hello", 202}} {
		conn, br := rawDoorConn(t, fd)
		fmt.Fprintf(conn, "POST /v1/x HTTP/1.1\r\nHost: door\r\nX-GPUGuard-Priority: P2\r\nContent-Length: 5\r\n\r\n%s", c.body)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("body %q: %d, want %d", c.body, resp.StatusCode, c.code)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.tasks) != 1 {
		t.Errorf("%d tasks stored, want the control's only", len(q.tasks))
	}
}
