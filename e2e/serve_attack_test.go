package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The front door against a hostile client (issue 42, items 2, 4, 6 and 7;
// docs/reliability.md, "The front door against a hostile client"). Each
// attack runs beside its control, the same flow without the attack, so
// that a harness that saw nothing cannot pass.

// TestDoorHeldClientGone: a POST held while the child loads, whose client
// closes its connection, never reaches the child, and its place among
// max_held frees at once. Control: the same POST from a client that stays
// takes the freed place (it is held, not refused as full), then reaches
// the child whole and is answered.
func TestDoorHeldClientGone(t *testing.T) {
	t.Parallel()
	a := startAttackRun(t, "8", "max_held = 1")
	post := func(path string) string {
		body := `{"prompt":"hello"}`
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, len(body), body)
	}
	gone := a.dial(t)
	gone.send(post("/v1/gone"))
	waitFor(t, "the POST to be held", 10*time.Second, func() bool { _, held := a.status(t); return held == 1 })
	gone.c.Close()
	closed := time.Now()
	waitFor(t, "its place to free", 2*time.Second, func() bool {
		code, held := a.status(t)
		if code == http.StatusOK {
			t.Fatal("the child became ready before the place freed: the test proves nothing")
		}
		return held == 0
	})
	t.Logf("the place freed %s after the client closed", time.Since(closed).Round(time.Millisecond))

	stays := a.dial(t)
	stays.send(post("/v1/stays"))
	waitFor(t, "the control POST to be held", 10*time.Second, func() bool { _, held := a.status(t); return held == 1 })
	if code, _ := a.status(t); code == http.StatusOK {
		t.Fatal("the child was ready before the control was held")
	}
	if resp, body := stays.answer(60 * time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("the control: %d %s", resp.StatusCode, body)
	}
	if a.seen("whole POST /v1/stays 18") != 1 {
		t.Errorf("the control did not reach the child whole; its log:\n%s", a.logText())
	}
	if strings.Contains(a.logText(), "/v1/gone") {
		t.Errorf("the POST whose client left reached the child; its log:\n%s", a.logText())
	}
	a.stop(t)
}

// TestDoorSmuggling: a request with both Content-Length and
// Transfer-Encoding, or a Content-Length that is not one number, gets 400
// and its connection closed, and nothing of it reaches the child: not the
// request, not what is smuggled after its body. Controls: the chunked
// request without Content-Length is passed whole; a request framed by
// Content-Length with a second one pipelined behind it passes both (so the
// child would have shown a smuggled request, had one passed).
func TestDoorSmuggling(t *testing.T) {
	t.Parallel()
	a := startAttackRun(t, "0", "")
	a.waitReady(t)
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: door\r\n\r\n"
	for _, c := range []struct{ name, head, body string }{
		{"cl-te", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"},
		{"te-cl", "Transfer-Encoding: chunked\r\nContent-Length: 40\r\n", "0\r\n\r\n"},
		{"cl-list", "Content-Length: 5, 5\r\n", "hello"},
		{"cl-twice", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello"},
		{"cl-sign", "Content-Length: +5\r\n", "hello"},
		{"cl-word", "Content-Length: five\r\n", "hello"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := a.dial(t)
			r.send("POST /v1/" + c.name + " HTTP/1.1\r\nHost: door\r\n" + c.head + "\r\n" + c.body + smuggled)
			resp, body := r.answer(10 * time.Second)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("answer %d %q, want 400", resp.StatusCode, body)
			}
			if !r.closed(5 * time.Second) {
				t.Error("the connection stayed open after the 400")
			}
		})
	}
	// The controls, on one connection each.
	r := a.dial(t)
	r.send("POST /v1/chunked HTTP/1.1\r\nHost: door\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if resp, body := r.answer(10 * time.Second); resp.StatusCode != http.StatusOK {
		t.Fatalf("the chunked control: %d %s", resp.StatusCode, body)
	}
	r = a.dial(t)
	r.send("POST /v1/length HTTP/1.1\r\nHost: door\r\nContent-Length: 5\r\n\r\nhello" + strings.Replace(smuggled, "/smuggled", "/pipelined", 1))
	for _, want := range []string{"/v1/length", "/pipelined"} {
		if resp, body := r.answer(10 * time.Second); resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("the pipelined control, %s: %d %s", want, resp.StatusCode, body)
		}
	}
	for _, line := range []string{"whole POST /v1/chunked 5", "whole POST /v1/length 5", "whole GET /pipelined 0"} {
		if a.seen(line) != 1 {
			t.Errorf("the controls: %q not in the child's log:\n%s", line, a.logText())
		}
	}
	if log := a.logText(); strings.Contains(log, "/smuggled") || strings.Contains(log, "/v1/cl-") || strings.Contains(log, "/v1/te-") {
		t.Errorf("an attack reached the child; its log:\n%s", log)
	}
	a.stop(t)
}

// TestDoorChildFraming: a child's answer with both Content-Length and
// Transfer-Encoding is not passed on: the client gets 502. Control: the
// same child's well-framed answer passes.
func TestDoorChildFraming(t *testing.T) {
	t.Parallel()
	a := startAttackRun(t, "0", "")
	a.waitReady(t)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for _, k := range []struct {
		path string
		code int
	}{{"/answer/cl-te", http.StatusBadGateway}, {"/answer/good", http.StatusOK}} {
		resp, err := c.Get("http://" + a.door + k.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != k.code {
			t.Errorf("%s: %d %q, want %d", k.path, resp.StatusCode, body, k.code)
		}
	}
	a.stop(t)
}

// TestDoorRetryRule: a child that reads a request whole and then resets
// the connection without answering. A POST is not sent twice: the client
// gets 503 gpuguard_unavailable with Retry-After. The same POST with an
// Idempotency-Key, and a GET, are sent once more and answered. Control: a
// POST the child answers reaches it once and is answered.
func TestDoorRetryRule(t *testing.T) {
	t.Parallel()
	a := startAttackRun(t, "0", "")
	a.waitReady(t)
	c := &http.Client{Timeout: 30 * time.Second}
	do := func(method, path string, hdr ...string) (*http.Response, string) {
		req, _ := http.NewRequest(method, "http://"+a.door+path, strings.NewReader(`{"n":1}`))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := do(http.MethodPost, "/reset/post")
	checkError(t, resp, body, http.StatusServiceUnavailable, "gpuguard_unavailable")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("the 503 has no Retry-After")
	}
	if n := a.seen("whole POST /reset/post 7"); n != 1 {
		t.Errorf("the child read the POST %d times, want 1:\n%s", n, a.logText())
	}
	for _, k := range []struct {
		method, path string
		hdr          []string
	}{
		{http.MethodPost, "/reset/keyed", []string{"Idempotency-Key", "k-1"}},
		{http.MethodPut, "/reset/put", nil},
	} {
		a.waitReady(t) // the reset closed the gate until a health check passed
		if resp, body := do(k.method, k.path, k.hdr...); resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s: %d %s, want it sent again and answered", k.method, k.path, resp.StatusCode, body)
		}
		if n := a.seen(fmt.Sprintf("whole %s %s 7", k.method, k.path)); n != 2 {
			t.Errorf("%s %s reached the child %d times, want 2:\n%s", k.method, k.path, n, a.logText())
		}
	}
	a.waitReady(t)
	if resp, body := do(http.MethodPost, "/v1/control"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the control: %d %s", resp.StatusCode, body)
	}
	if n := a.seen("whole POST /v1/control 7"); n != 1 {
		t.Errorf("the control reached the child %d times:\n%s", n, a.logText())
	}
	a.stop(t)
}

// bodyTimeouts shortens the door's body bounds (60 s without a byte,
// 10 min in all) for the tests, through the variable documented for that
// (docs/serving.md); under GPUGUARD_SOAK=1 TestDoorSilentBodyFullTime
// runs the real 60 s.
const bodyTimeouts = "GPUGUARD_DOOR_BODY_TIMEOUTS=2s,8s"

// TestDoorSilentBody: a POST whose body never comes gets 408 once 2 s
// (the shortened 60 s) pass without a byte, and what the child got of it
// is cut off: the child never has it whole. A body that trickles, each
// byte within the idle bound, gets 408 at the bound in all (the shortened
// 10 min). Controls: the same POSTs whose bodies come in time reach the
// child whole and are answered.
func TestDoorSilentBody(t *testing.T) {
	t.Parallel()
	a := startAttackRun(t, "0", "", bodyTimeouts)
	a.waitReady(t)
	head := func(path string, n int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: door\r\nContent-Length: %d\r\n\r\n", path, n)
	}
	// trickle sends body one byte every interval, in a goroutine, and
	// stops at the first failed write (the door closed the connection).
	trickle := func(r *rawConn, body string, interval time.Duration) {
		go func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for i := range len(body) {
				<-tick.C
				if _, err := r.c.Write([]byte{body[i]}); err != nil {
					return
				}
			}
		}()
	}

	silent := a.dial(t)
	start := time.Now()
	silent.send(head("/v1/silent", 1000) + "partial")
	resp, body := silent.answer(30 * time.Second)
	took := time.Since(start)
	checkError(t, resp, body, http.StatusRequestTimeout, "invalid_request_error")
	if took < 2*time.Second || took > 6*time.Second {
		t.Errorf("the silent body got 408 after %s, want about 2 s", took)
	}
	if !silent.closed(5 * time.Second) {
		t.Error("the connection stayed open after the 408")
	}

	slow := a.dial(t)
	start = time.Now()
	slow.send(head("/v1/trickle", 100))
	trickle(slow, strings.Repeat("x", 100), time.Second)
	resp, body = slow.answer(30 * time.Second)
	took = time.Since(start)
	checkError(t, resp, body, http.StatusRequestTimeout, "invalid_request_error")
	if took < 8*time.Second || took > 12*time.Second {
		t.Errorf("the trickling body got 408 after %s, want about 8 s", took)
	}

	for _, c := range []struct {
		path     string
		interval time.Duration
	}{{"/v1/silent-control", 0}, {"/v1/trickle-control", time.Second}} {
		r := a.dial(t)
		if c.interval == 0 {
			r.send(head(c.path, 5) + "hello")
		} else {
			r.send(head(c.path, 5))
			trickle(r, "hello", c.interval)
		}
		if resp, body := r.answer(30 * time.Second); resp.StatusCode != http.StatusOK {
			t.Fatalf("the control %s: %d %s", c.path, resp.StatusCode, body)
		}
	}
	// What the child got of the two (the head, perhaps some bytes) it saw
	// cut off.
	waitFor(t, "the child to see the cut bodies end", 10*time.Second, func() bool {
		return a.cutOrAbsent("POST /v1/silent") && a.cutOrAbsent("POST /v1/trickle")
	})
	for _, line := range []string{"whole POST /v1/silent-control 5", "whole POST /v1/trickle-control 5"} {
		if a.seen(line) != 1 {
			t.Errorf("%q is not in the child's log:\n%s", line, a.logText())
		}
	}
	if log := a.logText(); strings.Contains(log, "whole POST /v1/silent ") || strings.Contains(log, "whole POST /v1/trickle ") {
		t.Errorf("a body the door answered 408 reached the child whole:\n%s", log)
	}
	a.stop(t)
}

// TestDoorSilentBodyFullTime is TestDoorSilentBody's first case with the
// real bound, 60 s without a byte, under GPUGUARD_SOAK=1 only.
func TestDoorSilentBodyFullTime(t *testing.T) {
	t.Parallel()
	if !pfSoak() {
		t.Skip("60 s: runs under GPUGUARD_SOAK=1")
	}
	a := startAttackRun(t, "0", "")
	a.waitReady(t)
	r := a.dial(t)
	start := time.Now()
	r.send("POST /v1/silent HTTP/1.1\r\nHost: door\r\nContent-Length: 1000\r\n\r\n")
	resp, body := r.answer(90 * time.Second)
	took := time.Since(start)
	checkError(t, resp, body, http.StatusRequestTimeout, "invalid_request_error")
	if took < 60*time.Second || took > 70*time.Second {
		t.Errorf("408 after %s, want 60 s", took)
	}
	a.stop(t)
}

// TestDoorManyTricklers: 1,000 clients at once whose bodies trickle (a
// byte every 2 s, within the idle bound) leave the door answering others:
// the median time of its status path at most doubles (checked under
// GPUGUARD_SOAK=1, logged otherwise), and gpuguard's RSS
// stays under 200 MiB (gpuguard as shipped: the race detector multiplies
// memory). Half the bodies are small (the door reads them whole before
// sending), half large (streamed to the child as they come). Control:
// the same median measured before the tricklers come.
func TestDoorManyTricklers(t *testing.T) {
	t.Parallel()
	n := pfSize("TRICKLERS", 1000, 1000)
	a := startAttackRunOf(t, shippedBin(t), "0", "", "GPUGUARD_DOOR_BODY_TIMEOUTS=5s,10m")
	a.waitReady(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// median is the status path's median over 4 s: two of the
	// tricklers' periods.
	median := func() time.Duration {
		var took []time.Duration
		for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
			start := time.Now()
			resp, err := c.Get("http://" + a.door + "/gpuguard/v1/status")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	before := median()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", a.door)
			if err != nil {
				t.Errorf("trickler %d: %v", i, err)
				return
			}
			defer conn.Close()
			length := 1000
			if i%2 == 1 {
				length = 1 << 20
			}
			if _, err := fmt.Fprintf(conn, "POST /v1/trickle/%d HTTP/1.1\r\nHost: door\r\nContent-Length: %d\r\n\r\n", i, length); err != nil {
				t.Errorf("trickler %d: %v", i, err)
				return
			}
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte("x")); err != nil {
						t.Errorf("trickler %d: the door closed its connection: %v", i, err)
						return
					}
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "every large trickling request to reach the child", 60*time.Second, func() bool {
		return strings.Count(a.logText(), "start POST /v1/trickle/") == n/2
	})
	during := median()
	rss := pfStatus(a.p.cmd.Process.Pid, "VmRSS")
	t.Logf("%d tricklers: the status path's median %s before, %s during; gpuguard's RSS %d KiB", n, before, during, rss)
	// The ratio is a timing figure, and the default suite runs e2e tests
	// side by side on small machines: it is asserted only in the soak run
	// (GPUGUARD_SOAK=1, alone), and logged otherwise.
	if pfSoak() && during > 2*before {
		t.Errorf("the median went from %s to %s with %d tricklers: more than doubled", before, during, n)
	}
	if rss <= 0 || rss > 200<<10 {
		t.Errorf("gpuguard's RSS %d KiB with %d tricklers, want under 200 MiB", rss, n)
	}
}
