package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loggingServer is a model server that appends each POST it gets to the
// file $OUT ("path sha256-of-body", before it answers), takes 300 ms,
// and answers the body's sha256: a replay's answer says which body the
// child got.
var loggingServer = pyServer(`
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        sum = hashlib.sha256(body).hexdigest().encode()
        with open(os.environ["OUT"], "a") as f:
            f.write(self.path + " " + sum.decode() + "\n")
        time.sleep(0.3)
        self.send_response(200)
        self.send_header("Content-Length", str(len(sum)))
        self.end_headers()
        self.wfile.write(sum)`)

// TestReplayKilledSQLite and ...Redis: gpuguard is SIGKILLed while it replays 20 deferred
// requests (each 600 KiB, so the kill finds a body between the store and
// the child). After the restart every request is answered, as the store
// says, with the answer to its own body: each reached the child once,
// but the one in flight at the kill, which may have reached it twice
// (delivery is at least once). None is lost. The control: at the kill
// some requests were done and some not, so the kill came mid-queue.
func TestReplayKilledSQLite(t *testing.T) {
	t.Parallel()
	testReplayKilled(t, "")
}

func TestReplayKilledRedis(t *testing.T) {
	t.Parallel()
	testReplayKilled(t, redisDeferKeys(t))
}

func testReplayKilled(t *testing.T, store string) {
	d := startDeferDoor(t, deferDoorOptions{child: loggingServer, deferKeys: store})
	// seen is the child's log: a line per request it got, "path sum".
	seen := func() []string {
		b, _ := os.ReadFile(d.e.path("out"))
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	const n = 20
	tickets := make([]string, n)
	sums := map[string]string{} // ticket: the sha256 of its body
	paths := map[string]string{}
	for i := range n {
		body := []byte(strings.Repeat(fmt.Sprintf("request %02d ", i), 600<<10/11))
		tickets[i] = d.deferP2(t, fmt.Sprintf("/req/%02d", i), body)
		sum := sha256.Sum256(body)
		sums[tickets[i]], paths[tickets[i]] = hex.EncodeToString(sum[:]), fmt.Sprintf("/req/%02d", i)
	}
	d.memoryFree(t)
	waitFor(t, "5 replays to reach the child", 60*time.Second, func() bool { return len(seen()) >= 5 })
	d.p.signal(syscall.SIGKILL)
	d.p.wait()
	before := map[string]int{}
	for _, tk := range d.e.tasksJSON("dq") {
		before[fmt.Sprint(tk["state"])]++
	}
	if before["done"] == 0 || before["done"] == n {
		t.Fatalf("at the kill %v: want some done and some not (control)", before)
	}

	d.start(t)
	for i, tk := range tickets {
		code, _, body := d.result(t, tk, 60*time.Second)
		if code != http.StatusOK || string(body) != sums[tk] {
			t.Errorf("request %d (%s): %d %q, want 200 and the answer to its own body", i, tk, code, body)
		}
	}
	runs := map[string]int{}
	for _, line := range seen() {
		path, sum, _ := strings.Cut(line, " ")
		runs[path]++
		if want := sums[tickets[pathIndex(path)]]; sum != want {
			t.Errorf("the child got another body for %s", path)
		}
	}
	twice := 0
	for _, tk := range tickets {
		switch runs[paths[tk]] {
		case 1:
		case 2:
			twice++
		default:
			t.Errorf("%s reached the child %d times", paths[tk], runs[paths[tk]])
		}
	}
	if twice > 1 {
		t.Errorf("%d requests ran twice, want at most the one in flight: %v", twice, runs)
	}
	for _, tk := range d.e.tasksJSON("dq") {
		if tk["state"] != "done" {
			t.Errorf("task %v after the restart, want done", tk)
		}
	}
	t.Logf("at the kill %v; after the restart all %d answered, %d ran twice", before, n, twice)
}

func pathIndex(path string) int {
	var i int
	fmt.Sscanf(path, "/req/%d", &i)
	return i
}
