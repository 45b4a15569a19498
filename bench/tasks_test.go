package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/redistest"
	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
)

var (
	tasksDefers = flag.Int("tasks.defers", 300, "tasks: deferral round trips measured per store")
	tasksRun    = flag.Int("tasks.run", 2000, "tasks: tasks delivered and acknowledged for the throughput")
	tasksList   = flag.Int("tasks.list", 100000, "tasks: queued tasks listed by gpuguard tasks")
)

// taskPolicy runs a child that never asks for memory; store is [defer]'s.
func taskPolicy(store string) string {
	return fmt.Sprintf(`[watch]
interval = "50ms"
[defer]
store = %q
max_tasks = 1000000
`, store)
}

// lineConn speaks the socket's lines.
type lineConn struct {
	b  *testing.B
	c  net.Conn
	sc *bufio.Scanner
}

func dialLines(b *testing.B, path string) *lineConn {
	c, err := net.Dial("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &lineConn{b: b, c: c, sc: sc}
}

func (l *lineConn) send(v any) {
	bs, _ := json.Marshal(v)
	if _, err := l.c.Write(append(bs, '\n')); err != nil {
		l.b.Fatal(err)
	}
}

func (l *lineConn) next() map[string]any {
	l.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if !l.sc.Scan() {
		l.b.Fatalf("socket closed: %v", l.sc.Err())
	}
	var m map[string]any
	json.Unmarshal(l.sc.Bytes(), &m)
	return m
}

// fillSim makes the sim GPU full (15 of 16 GiB): P2 is deferred.
func fillSim(b *testing.B, stateDir string, used uint64) {
	dir := filepath.Join(stateDir, "sim", "0")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	os.Chmod(stateDir, 0o700)
	tmp := filepath.Join(dir, ".t")
	os.WriteFile(tmp, []byte(fmt.Sprint(used)), 0o600)
	if err := os.Rename(tmp, filepath.Join(dir, "other")); err != nil {
		b.Fatal(err)
	}
}

// deferRoundTrips measures n reserve-with-payload -> ticket round trips.
func deferRoundTrips(b *testing.B, s *sandbox, name, store string, n int) []time.Duration {
	fillSim(b, filepath.Join(s.dir, name), 15<<30)
	g := s.start(name, s.policy(name, taskPolicy(store)), nil, childBin, "idle")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.running(ctx).Close()
	c := dialLines(b, g.socket)
	req := map[string]any{"type": "reserve", "bytes": 1 << 30, "priority": "P2", "tool": "bench", "payload": map[string]any{"n": 1}}
	for { // until a sample has seen the full GPU
		c.send(req)
		r := c.next()
		if r["ticket"] != nil {
			break
		}
		if l, _ := r["lease"].(string); l != "" {
			c.send(map[string]any{"type": "release", "lease": l})
			c.next()
		}
	}
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		c.send(req)
		r := c.next()
		ds = append(ds, time.Since(t0))
		if r["ticket"] == nil {
			b.Fatalf("no ticket: %v", r)
		}
	}
	g.stop()
	return ds
}

// BenchmarkTasks measures the deferred-task queue with the real binary:
//
//   - defer-sqlite, defer-redis: a reserve with a payload -> the reply
//     with its ticket, the task durable (target: median <= 2 ms on SQLite;
//     Redis is a local redis-server with appendfsync always);
//   - run-per-s: tasks delivered and acknowledged (done) per second on
//     SQLite, one subscriber (target: >= 1,000/s), beside disk-fsync-per-s,
//     the disk's raw fsync rate measured just before, and their ratio
//     run-per-fsync (each task costs one fsync: 1.0 is the ceiling);
//   - list: `gpuguard tasks NAME --json` over 100,000 queued tasks: wall
//     time and peak RSS (target: <= 1 s and <= 64 MiB).
func BenchmarkTasks(b *testing.B) {
	defer reportLoad(b)()
	for b.Loop() {
		s := newSandbox(b)
		stats(b, "defer-sqlite-", "ms", deferRoundTrips(b, s, "tsql", "", *tasksDefers))
		srv := redistest.Start(b)
		stats(b, "defer-redis-", "ms", deferRoundTrips(b, s, "tred", srv.URL(), *tasksDefers))
		// The disk's own fsync rate, measured here in the same run: each
		// task costs one fsynced commit (its done), so run-per-fsync is the
		// share of that ceiling reached, a figure that means something on a
		// loaded machine whose absolute rates do not.
		fsyncs := fsyncRate(b, s.dir, 500*time.Millisecond)
		run, cpu := runThroughput(b, s, *tasksRun)
		b.ReportMetric(run, "run-per-s")
		b.ReportMetric(cpu.Seconds()*1e6, "run-cpu-us-per-task")
		b.ReportMetric(fsyncs, "disk-fsync-per-s")
		b.ReportMetric(run/fsyncs, "run-per-fsync")
		wall, rss := listTasks(b, s, *tasksList)
		b.ReportMetric(wall.Seconds(), "list-s")
		b.ReportMetric(rss, "list-rss-MiB")
		b.ReportMetric(0, "ns/op")
	}
}

// fsyncRate is how many 4 KiB write + fsync pairs a file in dir takes per
// second, over d: the ceiling of one-fsync-per-task throughput on this disk.
func fsyncRate(b *testing.B, dir string, d time.Duration) float64 {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d {
		if _, err := f.WriteAt(page, int64(n%64)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds()
}

// runThroughput queues n tasks, then frees the GPU and answers done to
// each delivery: tasks per second from the first delivery to the last done,
// and the instance's CPU time per task over the same span (schedstat's,
// summed over its threads), which its neighbours' load changes far less
// than its wall time.
func runThroughput(b *testing.B, s *sandbox, n int) (float64, time.Duration) {
	name := "trun"
	dir := filepath.Join(s.dir, name)
	os.MkdirAll(dir, 0o700)
	st, err := sqlite.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	ts := make([]api.Task, n)
	for i := range ts {
		ts[i] = api.Task{Ticket: fmt.Sprintf("t-%08d", i), Tool: "bench", Priority: "P2", Bytes: 1 << 20,
			Payload: json.RawMessage(`{"n":1}`), Enqueued: now.Add(time.Duration(i))}
	}
	if err := st.EnqueueMany(context.Background(), ts); err != nil {
		b.Fatal(err)
	}
	st.Close()
	g := s.start(name, s.policy(name, taskPolicy("")), nil, childBin, "idle")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.running(ctx).Close()
	c := dialLines(b, g.socket)
	c.send(map[string]any{"type": "subscribe", "tasks": true})
	var first time.Time
	var cpu0 time.Duration
	for done := 0; done < n; {
		m := c.next()
		if m["type"] != "task" {
			continue
		}
		if first.IsZero() {
			first = time.Now()
			_, cpu0, _ = cpuTime(b, g.cmd.Process.Pid)
		}
		c.send(map[string]any{"type": "done", "ticket": m["ticket"]})
		done++
	}
	elapsed := time.Since(first)
	_, cpu1, _ := cpuTime(b, g.cmd.Process.Pid)
	g.stop()
	return float64(n-1) / elapsed.Seconds(), (cpu1 - cpu0) / time.Duration(n-1)
}

// listTasks queues n tasks and times `gpuguard tasks NAME --json`.
func listTasks(b *testing.B, s *sandbox, n int) (time.Duration, float64) {
	dir := filepath.Join(s.dir, "tlist")
	os.MkdirAll(dir, 0o700)
	st, err := sqlite.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	ts := make([]api.Task, n)
	for i := range ts {
		ts[i] = api.Task{Ticket: fmt.Sprintf("t-%032d", i), Tool: "bench", Priority: "P2", Bytes: 1 << 30,
			Payload: json.RawMessage(`{"doc":"a payload of some size, as a tool would send it"}`), Enqueued: now.Add(time.Duration(i))}
	}
	if err := st.EnqueueMany(context.Background(), ts); err != nil {
		b.Fatal(err)
	}
	st.Close()
	// A child's ru_maxrss counts the parent's pages it shared before its
	// exec (Go forks with CLONE_VM), so this test's own 80 MiB would show
	// as the child's: a small python3 parent spawns it and reads its
	// rusage (an upper bound: python's own ~10 MiB count too), with a bare
	// `gpuguard version` measured the same way beside it.
	ts = nil
	rss := func(args ...string) (time.Duration, float64) {
		script := `import resource, subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"), check=True)
print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)`
		out, err := exec.Command("python3", append([]string{"-c", script, filepath.Join(s.dir, "list.json")}, args...)...).Output()
		if err != nil {
			b.Fatalf("listing: %v", err)
		}
		var secs, kib float64
		if _, err := fmt.Sscan(string(out), &secs, &kib); err != nil {
			b.Fatalf("python3 said %q: %v", out, err)
		}
		return time.Duration(secs * float64(time.Second)), kib / 1024
	}
	_, verRSS := rss(bin, "version")
	b.ReportMetric(verRSS, "version-rss-MiB")
	wall, listRSS := rss(bin, "tasks", "tlist", "--json", "--state-dir", dir)
	fi, _ := os.Stat(filepath.Join(s.dir, "list.json"))
	if fi == nil || fi.Size() < int64(n)*100 {
		b.Fatalf("the list is too short for %d tasks", n)
	}
	return wall, listRSS
}
