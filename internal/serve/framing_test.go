package serve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHeadScan: the framing each head declares, fed whole and fed byte
// by byte, and where the head ends.
func TestHeadScan(t *testing.T) {
	const rest = "BODY"
	for _, c := range []struct {
		name, head string
		err        error
		length     int64
		chunked    bool
		status     int
	}{
		{"no-body", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", nil, 0, false, 0},
		{"length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", nil, 12, false, 0},
		{"length-spaces", "POST / HTTP/1.1\r\ncontent-LENGTH:\t 7 \r\n\r\n", nil, 7, false, 0},
		{"chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", nil, 0, true, 0},
		{"bare-lf", "POST / HTTP/1.1\nContent-Length: 3\n\n", nil, 3, false, 0},
		{"leading-crlf", "\r\nGET / HTTP/1.1\r\n\r\n", nil, 0, false, 0},
		{"cl-te", "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", errLengthAndChunked, 5, true, 0},
		{"te-cl", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", errLengthAndChunked, 5, true, 0},
		{"te-identity-cl", "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\n", errLengthAndChunked, 5, true, 0},
		{"cl-twice", "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", errManyLengths, 5, false, 0},
		{"cl-list", "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", errBadLength, 0, false, 0},
		{"cl-sign", "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", errBadLength, 0, false, 0},
		{"cl-empty", "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", errBadLength, 0, false, 0},
		{"cl-long", "POST / HTTP/1.1\r\nContent-Length: " + strings.Repeat("0", 60) + "5\r\n\r\n", errBadLength, 0, false, 0},
		{"folded-is-not-a-field", "POST / HTTP/1.1\r\nX-A: b\r\n Content-Length: 5\r\n\r\n", nil, 0, false, 0},
		{"long-other-field", "POST / HTTP/1.1\r\nX-Long: " + strings.Repeat("v", 9000) + "\r\nContent-Length: 2\r\n\r\n", nil, 2, false, 0},
		{"response", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n", nil, 4, false, 200},
		{"response-cl-te", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", errLengthAndChunked, 4, true, 200},
		{"hints", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", nil, 0, false, 103},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, split := range []bool{false, true} {
				var h headScan
				in := c.head + rest
				n := 0
				if split {
					for n < len(in) && !h.done {
						n += h.feed([]byte(in[n : n+1]))
					}
				} else {
					n = h.feed([]byte(in))
				}
				if !h.done || n != len(c.head) {
					t.Fatalf("split %v: done %v after %d bytes, want the head's %d", split, h.done, n, len(c.head))
				}
				if err := h.framing(); !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
					t.Errorf("split %v: framing %v, want %v", split, err, c.err)
				}
				if c.err == nil && (h.length != c.length || h.chunked != c.chunked) || h.status != c.status {
					t.Errorf("split %v: length %d chunked %v status %d, want %d %v %d", split, h.length, h.chunked, h.status,
						c.length, c.chunked, c.status)
				}
			}
		})
	}
}

// streamConn is a net.Conn whose reads come from r.
type streamConn struct {
	net.Conn
	r io.Reader
}

func (s streamConn) Read(p []byte) (int, error) { return s.r.Read(p) }

// TestClientConnHeads: a connection carrying heads, bodies framed by
// Content-Length and a chunked one is passed byte for byte, but no read
// returns bytes past a head's end, so each head's verdict is known before
// net/http parses it; after the chunked body the rest passes unscanned.
func TestClientConnHeads(t *testing.T) {
	heads := []string{
		"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
		"GET /b HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /c HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
	}
	bodies := []string{"hello", "", "3\r\nabc\r\n0\r\n\r\n"}
	after := "GET /d HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n"
	var in strings.Builder
	var ends []int // where each head ends in the stream
	for i := range heads {
		in.WriteString(heads[i])
		ends = append(ends, in.Len())
		in.WriteString(bodies[i])
	}
	in.WriteString(after)
	c := newClientConn(streamConn{r: strings.NewReader(in.String())})
	var out strings.Builder
	var verdicts []string
	buf := make([]byte, 7) // smaller than a head: a head takes several reads
	for {
		before := c.heads
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if c.heads != before {
			if out.Len() != ends[c.heads-1] {
				t.Fatalf("head %d ended at byte %d, want %d", c.heads, out.Len(), ends[c.heads-1])
			}
			verdicts = append(verdicts, fmt.Sprint(c.verdict))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != in.String() {
		t.Errorf("passed %q, want %q", out.String(), in.String())
	}
	if want := fmt.Sprint([]string{"<nil>", "<nil>", errLengthAndChunked.Error()}); fmt.Sprint(verdicts) != want {
		t.Errorf("verdicts %v, want %v (and the head after the chunked body not scanned)", verdicts, want)
	}
}

// TestFramingRefused: through the door, a request whose framing is
// refused gets 400 and its connection closed, and neither it nor what
// follows its body reaches the child: the door's own 400 for a framing
// net/http would take (both headers, the same Content-Length twice),
// net/http's for one it refuses itself (a Content-Length that is not one
// number, two that differ). A request whose framing the door vouches for
// passes, and so does one pipelined behind it.
func TestFramingRefused(t *testing.T) {
	reached := make(chan string, 16)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reached <- r.URL.Path + " " + string(b)
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10})
	fd.Profile("fp16", 0, 2)
	fd.launch(t, 1)
	send := func(raw string) *bufio.Reader {
		conn, br := rawDoorConn(t, fd)
		if _, err := io.WriteString(conn, raw); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		return br
	}
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, c := range []struct {
		name, head, body string
		door             bool // the door's own 400, not net/http's
	}{
		{"cl-te", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n", true},
		{"cl-twice", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello", true},
		{"cl-word", "Content-Length: five\r\n", "hello", false},
		{"cl-differ", "Content-Length: 5\r\nContent-Length: 6\r\n", "hello", false},
	} {
		br := send("POST /a HTTP/1.1\r\nHost: x\r\n" + c.head + "\r\n" + c.body + smuggled)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		door := strings.Contains(string(b), "invalid_request_error") && resp.Header.Get(HeaderProfile) == "fp16"
		if resp.StatusCode != 400 || door != c.door {
			t.Errorf("%s: %d %s %v, want 400 (the door's own: %v)", c.name, resp.StatusCode, b, resp.Header, c.door)
		}
		if _, err := br.ReadByte(); !closedErr(err) {
			t.Errorf("%s: after the 400: %v, want the connection closed", c.name, err)
		}
	}
	br := send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" + strings.Replace(smuggled, "smuggled", "pipelined", 1))
	for _, want := range []string{"/b hello", "/pipelined "} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := <-reached; resp.StatusCode != 200 || got != want {
			t.Errorf("the control: %d, the child got %q, want %q", resp.StatusCode, got, want)
		}
	}
	select {
	case got := <-reached:
		t.Errorf("the child got %q", got)
	default:
	}
}

// TestAnswerFramingRefused: a child's answer with both Content-Length
// and Transfer-Encoding is not passed on: 502, and the connection to the
// child is closed. The same child's next answer, well framed, passes.
func TestAnswerFramingRefused(t *testing.T) {
	up, log := trackedUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bad" {
			fmt.Fprint(w, "good")
			return
		}
		if conn, _ := hijackWrite(t, w, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"); conn != nil {
			conn.Close()
		}
	})
	fd := startDoor(t, Config{Upstream: up.URL, Hold: time.Minute, MaxHeld: 10, Retry: true})
	fd.launch(t, 1)
	c := newClient(t)
	if resp, body := do1(t, c, "GET", fd.url+"/bad", ""); resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "malformed") {
		t.Errorf("a CL+TE answer: %d %q, want 502", resp.StatusCode, body)
	}
	if resp, body := do1(t, c, "GET", fd.url+"/good", ""); resp.StatusCode != 200 || body != "good" {
		t.Errorf("the control: %d %q", resp.StatusCode, body)
	}
	if r := fd.meter.retries.Load(); r != 0 {
		t.Errorf("%d retries of an answered request", r)
	}
	if n := log.conns(); n != 2 {
		t.Errorf("%d connections carried requests, want 2", n)
	}
}

// TestClientConnUpgraded: after an upgrade the connection's bytes pass
// as they come, not cut at line ends as a head's are.
func TestClientConnUpgraded(t *testing.T) {
	in := "GET / HTTP/1.1\r\nUpgrade: x\r\n\r\nframe 1\r\n\r\nframe 2\n"
	c := newClientConn(streamConn{r: strings.NewReader(in)})
	head := make([]byte, 64)
	n, err := c.Read(head)
	if err != nil || string(head[:n]) != in[:strings.Index(in, "frame")] {
		t.Fatalf("the head: %q %v", head[:n], err)
	}
	c.upgraded()
	n, err = c.Read(head)
	if err != nil || string(head[:n]) != "frame 1\r\n\r\nframe 2\n" {
		t.Errorf("after the upgrade: %q %v, want the rest in one read", head[:n], err)
	}
}
