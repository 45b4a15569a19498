package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
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

// echoServer is a model server that answers every POST with its body
// (a deferred request's replay then stores a response as large as it).
var echoServer = pyServer(`
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)`)

// Issue 42's third attack, its figures: 24 deferrals of 16 MiB at once.
const (
	bigDeferrals = 24
	bigBody      = 16 << 20
	// rssBound is the most gpuguard's RSS may reach in the attack (MiB).
	rssBound = 200
	// rssSettle is how long RSS may take to come back after it, and
	// rssBack how far above its level before the attack it may stay (MiB).
	rssSettle = 10 * time.Second
	rssBack   = 32
)

// TestDeferralsBoundedAndStreamedSQLite and ...Redis are issue 42's third
// attack (and, on Redis, the eighth): 24 P2 requests of 16 MiB at once took
// gpuguard to 1.44 GiB RSS (1.9 GiB with Redis), not returned after, and
// deferrals did not count toward max_held. Now, with max_held = 24:
//   - the 24 count as held while their bodies come, and a 25th request
//     that would wait gets 503 at once;
//   - each body goes to the store as it arrives: gpuguard's peak RSS
//     (VmHWM) stays under 200 MiB, and its RSS is back within 32 MiB of
//     where it was within 10 s;
//   - the replays (each 16 MiB to the child and 16 MiB back) and 24
//     clients reading their 16 MiB results at once stay under it too;
//   - every client gets its own body back, byte for byte (the control:
//     the bodies were stored and replayed whole, not dropped).
//
// It runs the plain build: its RSS is what users get.
func TestDeferralsBoundedAndStreamedSQLite(t *testing.T) {
	t.Parallel()
	testDeferralsBoundedAndStreamed(t, "")
}

func TestDeferralsBoundedAndStreamedRedis(t *testing.T) {
	t.Parallel()
	testDeferralsBoundedAndStreamed(t, redisDeferKeys(t))
}

func testDeferralsBoundedAndStreamed(t *testing.T, store string) {
	if testing.Short() {
		t.Skip("moves 1.2 GiB through gpuguard")
	}
	binary, err := pfPlain()
	if err != nil {
		t.Fatal(err)
	}
	d := startDeferDoor(t, deferDoorOptions{child: echoServer, binary: binary,
		serve: fmt.Sprintf("max_held = %d", bigDeferrals), deferKeys: store})
	pid := d.p.cmd.Process.Pid
	d.deferP2(t, "/warm", []byte("warm up the store")) // a sample has seen the full GPU
	base := pfStatus(pid, "VmRSS")

	// 24 clients send their headers and first MiB, and wait.
	bodies := make([][]byte, bigDeferrals)
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, bigBody)
		copy(bodies[i], fmt.Sprintf("client %d ", i))
	}
	rest := make(chan struct{})
	tickets := make([]string, bigDeferrals)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, err := slowPost(d.base, bodies[i], 1<<20, rest)
			switch {
			case err != nil:
				t.Errorf("client %d: %v", i, err)
			case code != http.StatusAccepted:
				t.Errorf("client %d: %d %s", i, code, body)
			default:
				tickets[i] = ticketOf(body)
			}
		}()
	}
	if !pfEventually(30*time.Second, func() bool { return heldNow(t, d) == bigDeferrals }) {
		t.Errorf("held %d while %d deferrals came, want them counted toward max_held", heldNow(t, d), bigDeferrals)
	}
	start := time.Now()
	code, hdr, body := httpDo(t, http.MethodPost, d.base+"/v1/completions", []byte("one more"), "X-GPUGuard-Priority", "P2")
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || time.Since(start) > 5*time.Second {
		t.Errorf("the 25th request past max_held: %d %v %s after %v, want 503 with Retry-After at once", code, hdr, body, time.Since(start))
	}
	close(rest)
	wg.Wait()
	if slices.Contains(tickets, "") {
		t.FailNow()
	}
	peak := pfStatus(pid, "VmHWM")
	t.Logf("RSS %d KiB before, peak %d KiB while 24 x 16 MiB were deferred", base, peak)
	if peak > rssBound<<10 {
		t.Errorf("peak RSS %d MiB while deferring, want under %d MiB", peak>>10, rssBound)
	}
	settle := func(after string) {
		t.Helper()
		start := time.Now()
		if !pfEventually(rssSettle, func() bool { return pfStatus(pid, "VmRSS") <= base+rssBack<<10 }) {
			t.Errorf("RSS %d KiB %v after %s, want within %d MiB of %d KiB", pfStatus(pid, "VmRSS"), rssSettle, after, rssBack, base)
			return
		}
		t.Logf("RSS back to %d KiB %v after %s", pfStatus(pid, "VmRSS"), time.Since(start).Round(time.Millisecond), after)
	}
	settle("the deferrals")

	// Memory frees: each is replayed (16 MiB each way), then 24 clients
	// read their results at once.
	d.memoryFree(t)
	for i, tk := range tickets {
		code, _, _ := d.result(t, tk, 120*time.Second)
		if code != http.StatusOK {
			t.Fatalf("client %d's result: %d", i, code)
		}
	}
	t.Logf("peak RSS %d KiB after the replays", pfStatus(pid, "VmHWM"))
	results := make([][32]byte, bigDeferrals)
	for i, tk := range tickets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(d.base + "/gpuguard/v1/tasks/" + tk)
			if err != nil {
				t.Errorf("client %d's result: %v", i, err)
				return
			}
			defer resp.Body.Close()
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			if err != nil || n != bigBody || resp.ContentLength != bigBody {
				t.Errorf("client %d's result: %d bytes (Content-Length %d), %v", i, n, resp.ContentLength, err)
			}
			copy(results[i][:], h.Sum(nil))
		}()
	}
	wg.Wait()
	for i := range bodies {
		if results[i] != sha256.Sum256(bodies[i]) {
			t.Errorf("client %d got another body back", i)
		}
	}
	peak = pfStatus(pid, "VmHWM")
	t.Logf("peak RSS %d KiB after the replays and the reads", peak)
	if peak > rssBound<<10 {
		t.Errorf("peak RSS %d MiB with the replays and results, want under %d MiB", peak>>10, rssBound)
	}
	settle("the results were read")
}

// slowPost sends a P2 POST of body: its headers and first bytes, then,
// once rest is closed, the others; and answers the response.
func slowPost(base string, body []byte, first int, rest <-chan struct{}) (int, string, error) {
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-GPUGuard-Priority: P2\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := c.Write(body[:first]); err != nil {
		return 0, "", err
	}
	<-rest
	if _, err := c.Write(body[first:]); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// heldNow is the status path's held.
func heldNow(t *testing.T, d *deferDoor) int {
	_, _, st := d.doorStatus(t)
	n, _ := st["held"].(float64)
	return int(n)
}

func ticketOf(body string) string {
	_, after, _ := strings.Cut(body, `"ticket":"`)
	tk, _, _ := strings.Cut(after, `"`)
	return tk
}
