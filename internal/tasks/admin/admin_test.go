package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/report/instances"
	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
)

// queue makes an instance dir under root with tasks in its SQLite queue.
func queue(t *testing.T, root, name string, now time.Time, ts ...api.Task) instances.Target {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.EnqueueMany(context.Background(), ts); err != nil {
		t.Fatal(err)
	}
	return instances.Target{Name: name, Dir: dir}
}

func task(ticket string, enq time.Time) api.Task {
	return api.Task{Ticket: ticket, Tool: "embed", Priority: "P2", Bytes: 1 << 30, Payload: json.RawMessage(`{}`), Enqueued: enq}
}

// TestList: one instance's tasks as a table without a NAME column, two
// instances' as JSON with a name each, oldest first; an empty listing
// says so; a dir without a queue is skipped.
func TestList(t *testing.T) {
	root, now := t.TempDir(), time.Unix(1_700_000_000, 0)
	a := queue(t, root, "a", now, task("t-1", now.Add(-90*time.Second)), task("t-2", now.Add(-30*time.Second)))
	b := queue(t, root, "b", now, task("t-3", now.Add(-10*time.Second)))
	none := instances.Target{Name: "c", Dir: filepath.Join(root, "c")}

	var out bytes.Buffer
	if err := List(&out, []instances.Target{a}, false, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TICKET") || !strings.HasPrefix(lines[1], "t-1") ||
		!strings.Contains(lines[1], "1 GiB") || !strings.Contains(lines[1], "1m30s") {
		t.Fatalf("table:\n%s", out.String())
	}

	out.Reset()
	if err := List(&out, []instances.Target{a, b, none}, true, now); err != nil {
		t.Fatal(err)
	}
	var got struct{ Tasks []row }
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(got.Tasks) != 3 || got.Tasks[0].Name != "a" || got.Tasks[2].Name != "b" || got.Tasks[2].Ticket != "t-3" ||
		got.Tasks[0].State != "queued" || got.Tasks[0].AgeSeconds != 90 {
		t.Fatalf("json: %+v", got.Tasks)
	}

	out.Reset()
	if err := List(&out, []instances.Target{none}, false, now); err != nil || out.String() != "no deferred tasks\n" {
		t.Fatalf("empty: %q %v", out.String(), err)
	}
}

// TestListEscapes: a tool and a last error with control characters (a
// client's and a child's) are shown escaped, and a long error is cut
// between characters.
func TestListEscapes(t *testing.T) {
	root, now := t.TempDir(), time.Unix(1_700_000_000, 0)
	tk := task("t-1", now)
	tk.Tool = "e\x1b[31mmbed\a"
	a := queue(t, root, "a", now, tk)
	if got := oneLine("fail\x1b]0;x\a " + strings.Repeat("é", 80)); strings.ContainsAny(got, "\x1b\a") ||
		!strings.HasPrefix(got, `fail\x1b]0;x\a é`) || !strings.HasSuffix(got, "é...") {
		t.Errorf("oneLine: %q", got)
	}
	var out bytes.Buffer
	if err := List(&out, []instances.Target{a}, false, now); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\a") || !strings.Contains(out.String(), `e\x1b[31mmbed\a`) {
		t.Errorf("table:\n%q", out.String())
	}
}

// TestDropWithoutInstance: a drop with no instance running removes the
// task and journals it here; a retry of a task that is not dead, or a
// dir without a queue, is an error.
func TestDropWithoutInstance(t *testing.T) {
	root, now := t.TempDir(), time.Now()
	a := queue(t, root, "a", now, task("t-1", now))
	msg, err := Change{Name: "a", Dir: a.Dir, Socket: filepath.Join(root, "none.sock"), Action: "drop", Ticket: "t-1"}.Do(context.Background())
	if err != nil || msg != "dropped t-1 (embed, queued)" {
		t.Fatalf("drop: %q %v", msg, err)
	}
	j, err := os.ReadFile(filepath.Join(a.Dir, paths.JournalFile))
	if err != nil || !strings.Contains(string(j), `"`+api.EventTaskDropped+`"`) || !strings.Contains(string(j), `"t-1"`) {
		t.Fatalf("journal: %s %v", j, err)
	}
	var out bytes.Buffer
	if err := List(&out, []instances.Target{a}, false, now); err != nil || out.String() != "no deferred tasks\n" {
		t.Fatalf("after the drop: %q %v", out.String(), err)
	}
	queue(t, root, "a", now, task("t-2", now))
	if _, err := (Change{Name: "a", Dir: a.Dir, Action: "retry", Ticket: "t-2"}).Do(context.Background()); err == nil {
		t.Fatal("retry of a queued task: no error")
	}
	if _, err := (Change{Name: "c", Dir: filepath.Join(root, "c"), Action: "drop", Ticket: "t-1"}).Do(context.Background()); err == nil ||
		!strings.Contains(err.Error(), "no deferred tasks") {
		t.Fatalf("no queue: %v", err)
	}
}
