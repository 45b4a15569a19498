package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/testbin"
)

// Helpers of the front door's attack tests (serve_attack_test.go): the
// real binary in front of testdata/recorder.py, which writes down every
// request that reached it and whether its body came whole.

// attackPolicy is one profile behind a front door; the child is the
// recorder, loading for %s seconds.
const attackPolicy = `
name = "atk"
command = ["/usr/bin/python3", %q, %q, %q, %q]
[watch]
backend  = "sim"
interval = "100ms"
[restart]
backoff      = "100ms"
stop_timeout = "2s"
[serve]
listen   = "%s"
upstream = "http://%s"
hold     = "60s"
%s
`

// attackRun is gpuguard with a front door in front of the recorder.
type attackRun struct {
	e                *env
	p                *proc
	door, child, log string
}

// startAttackRun starts gpuguard; the recorder loads for load seconds
// (nothing listens meanwhile, so requests are held), extra is more of
// [serve], env more of gpuguard's environment.
func startAttackRun(t *testing.T, load, extra string, env ...string) *attackRun {
	t.Helper()
	return startAttackRunOf(t, "", load, extra, env...)
}

// startAttackRunOf is startAttackRun of another binary ("": bin).
func startAttackRunOf(t *testing.T, binary, load, extra string, env ...string) *attackRun {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	recorder, err := filepath.Abs("testdata/recorder.py")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.bin = binary
	a := &attackRun{e: e, door: freeLoopbackAddr(t), child: freeLoopbackAddr(t), log: e.path("requests.log")}
	_, port, _ := net.SplitHostPort(a.child)
	pol := e.policy(fmt.Sprintf(attackPolicy, recorder, port, load, a.log, a.door, a.child, extra))
	a.p = e.start([]string{"run", "--policy", pol}, env...)
	waitFor(t, "the front door to listen", 30*time.Second, func() bool {
		c, err := net.Dial("tcp", a.door)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return a
}

// status is the door's status path: its code and the count held.
func (a *attackRun) status(t *testing.T) (code, held int) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + a.door + "/gpuguard/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Held int `json:"held"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("status path: %v", err)
	}
	return resp.StatusCode, st.Held
}

// waitReady waits for the door to pass requests.
func (a *attackRun) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, "the child to be ready", 30*time.Second, func() bool {
		code, _ := a.status(t)
		return code == http.StatusOK
	})
}

// seen is how many of the recorder's log lines are exactly line.
func (a *attackRun) seen(line string) int {
	b, _ := os.ReadFile(a.log)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// cutOrAbsent reports whether the request what ("METHOD PATH") either
// never reached the child or had its body cut off there.
func (a *attackRun) cutOrAbsent(what string) bool {
	log := a.logText()
	return !strings.Contains(log, "start "+what+"\n") || strings.Contains(log, "cut "+what+" ")
}

// logText is the recorder's log, for failure messages.
func (a *attackRun) logText() string {
	b, _ := os.ReadFile(a.log)
	return string(b)
}

// stop ends gpuguard.
func (a *attackRun) stop(t *testing.T) {
	t.Helper()
	a.p.signal(sigterm)
	if code := a.p.wait(); code != 0 {
		t.Errorf("gpuguard exit %d; stderr:\n%s", code, a.p.stderr.String())
	}
}

// rawConn is a client connection to the door that writes bytes as given.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (a *attackRun) dial(t *testing.T) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", a.door)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatalf("writing to the door: %v", err)
	}
}

// answer reads one answer (within d) and its body.
func (r *rawConn) answer(d time.Duration) (*http.Response, string) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		r.t.Fatalf("no answer within %s: %v", d, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		r.t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the door closes the connection within d, with
// nothing more sent on it.
func (r *rawConn) closed(d time.Duration) bool {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	n, err := r.br.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return n == 0 && err != nil
}

// checkError checks an answer of the door's own: its code, the
// OpenAI-shaped body of that code and type, and the profile headers.
func checkError(t *testing.T, resp *http.Response, body string, code int, typ string) {
	t.Helper()
	var e struct {
		Error struct {
			Type string `json:"type"`
			Code int    `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode != code || json.Unmarshal([]byte(body), &e) != nil || e.Error.Type != typ || e.Error.Code != code {
		t.Fatalf("answer %d %q, want %d of type %s", resp.StatusCode, body, code, typ)
	}
	if resp.Header.Get("X-GPUGuard-Profile") == "" || resp.Header.Get("X-GPUGuard-Level") == "" {
		t.Errorf("the door's %d lacks the profile headers: %v", code, resp.Header)
	}
}

// shipped is gpuguard built as shipped, without the race detector (which
// multiplies memory), for a test of its RSS; built once, on first use.
var shipped struct {
	once sync.Once
	path string
	err  error
}

func shippedBin(t *testing.T) string {
	t.Helper()
	shipped.once.Do(func() {
		shipped.path = filepath.Join(filepath.Dir(bin), "gpuguard-shipped")
		shipped.err = testbin.Build(shipped.path, "..", false)
	})
	if shipped.err != nil {
		t.Fatalf("building gpuguard without -race: %v", shipped.err)
	}
	return shipped.path
}
