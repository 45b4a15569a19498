package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func event(i int) api.Event {
	return api.Event{Time: t0.Add(time.Duration(i) * time.Second), Name: "llama",
		Event: api.EventStart, Profile: "fp16", PID: i}
}

func mustOpen(t *testing.T, path string, opts Options) *Journal {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	j, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "events.jsonl")
	j := mustOpen(t, path, Options{})
	if j.Last() != nil {
		t.Fatal("Last of an empty journal is not nil")
	}
	for i := range 5 {
		j.Observe(event(i))
	}
	if got := j.Last(); got == nil || got.PID != 4 {
		t.Fatalf("Last = %+v, want the event with pid 4", got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j.Observe(event(99)) // after Close: ignored, no panic
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", st.Mode().Perm())
	}
	evs, skipped, err := Read(path, time.Time{})
	if err != nil || skipped != 0 || len(evs) != 5 {
		t.Fatalf("Read = %d events, %d skipped, %v; want 5, 0, nil", len(evs), skipped, err)
	}
	for i, ev := range evs {
		if ev.PID != i || !ev.Time.Equal(event(i).Time) {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	evs, _, _ = Read(path, t0.Add(3*time.Second))
	if len(evs) != 2 || evs[0].PID != 3 {
		t.Errorf("Read since +3s = %+v, want pids 3, 4", evs)
	}
}

func TestRotationBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	const maxBytes, keep, n = 4 << 10, 2, 2000
	j := mustOpen(t, path, Options{Limits: Limits{MaxBytes: maxBytes, MaxFiles: keep}})
	for i := range n {
		j.Observe(event(i))
		if i%500 == 0 {
			j.Flush() // the queue holds 1024: stay below it
		}
	}
	j.Close()
	if d := j.Dropped(); d != 0 {
		t.Fatalf("dropped %d", d)
	}
	total := journalSize(t, dir)
	if total > maxBytes*(keep+1) {
		t.Errorf("journal holds %d bytes, bound %d", total, maxBytes*(keep+1))
	}
	if _, err := os.Stat(rotated(path, keep+1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists: keep=%d not honoured", rotated(path, keep+1), keep)
	}
	evs, skipped, err := Read(path, time.Time{})
	if err != nil || skipped != 0 {
		t.Fatalf("Read: %d skipped, %v", skipped, err)
	}
	// The newest events survive, in order, with no gap.
	if len(evs) == 0 || evs[len(evs)-1].PID != n-1 {
		t.Fatalf("last event read is not the last written")
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].PID != evs[i-1].PID+1 {
			t.Fatalf("gap or disorder at %d: %d then %d", i, evs[i-1].PID, evs[i].PID)
		}
	}
}

func journalSize(t testing.TB, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size()
	}
	return total
}

func TestTornAndMalformedLinesSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	good := `{"time":"2025-03-01T12:00:00Z","event":"start","profile":"fp16","level":0}`
	content := strings.Join([]string{
		good,
		`not json at all`,
		`{"time":"2025-03-01T12:00:01Z","profile":"fp16"}`, // no event name
		``,
		strings.Replace(good, "start", "stepdown", 1),
		`{"time":"2025-03-01T12:00:02Z","event":"sto`, // torn: no newline
	}, "\n")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	evs, skipped, err := Read(path, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Event != "start" || evs[1].Event != "stepdown" {
		t.Errorf("events = %+v", evs)
	}
	if skipped != 3 {
		t.Errorf("skipped = %d, want 3 (garbage, no event, torn)", skipped)
	}
}

func TestReadOrderAcrossRotatedFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	for i, name := range []string{rotated(path, 10), rotated(path, 2), rotated(path, 1), path} {
		line := fmt.Sprintf(`{"time":"2025-03-01T12:00:0%dZ","event":"start","profile":"p","level":0,"pid":%d}`+"\n", i, i)
		if err := os.WriteFile(name, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(path+".bak", []byte("ignored\n"), 0o600)
	evs, skipped, err := Read(path, time.Time{})
	if err != nil || skipped != 0 || len(evs) != 4 {
		t.Fatalf("Read = %+v, %d, %v", evs, skipped, err)
	}
	for i, ev := range evs {
		if ev.PID != i {
			t.Errorf("position %d holds pid %d: not oldest first", i, ev.PID)
		}
	}
}

func TestReadMissing(t *testing.T) {
	_, _, err := Read(filepath.Join(t.TempDir(), "events.jsonl"), time.Time{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestOpenUnwritableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores permission bits; a path under a regular file
		// fails for everyone.
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o600)
		if _, err := Open(filepath.Join(f, "events.jsonl"), Options{}); err == nil {
			t.Fatal("Open under a regular file succeeded")
		}
		return
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "events.jsonl"), Options{}); err == nil {
		t.Fatal("Open in a read-only dir succeeded")
	}
}

// TestConcurrentReaderSeesWholeLines reads while a writer appends and
// rotates: every event read must be whole, and at most the one line being
// written at that instant may be skipped per read.
func TestConcurrentReaderSeesWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	j := mustOpen(t, path, Options{Limits: Limits{MaxBytes: 64 << 10, MaxFiles: 2}})
	big := strings.Repeat("x", 3000) // lines span pages: a torn read is likelier
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ev := event(i)
			ev.Detail = big
			j.Observe(ev)
			if i%100 == 0 {
				j.Flush()
			}
		}
	})
	for range 60 {
		evs, skipped, err := Read(path, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if skipped > 1 {
			t.Fatalf("a concurrent read skipped %d lines", skipped)
		}
		for _, ev := range evs {
			if ev.Detail != big || ev.Event != api.EventStart {
				t.Fatalf("partial event: %.80q", ev.Detail)
			}
		}
	}
	close(stop)
	wg.Wait()
}

func TestWriteFailureCountedAndLoggedOnce(t *testing.T) {
	var logs []string
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	mfs := newMemFS()
	j, err := open(path, Options{Logf: logf}, mfs)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ff := mfs.file(path)
	ff.partial = true

	j.Observe(event(0))
	j.Flush()
	ff.set(true)
	for i := 1; i <= 3; i++ {
		j.Observe(event(i))
	}
	j.Flush()
	ff.set(false)
	j.Observe(event(4))
	j.Close()

	if d := j.Dropped(); d != 3 {
		t.Errorf("Dropped = %d, want 3", d)
	}
	if len(logs) != 2 || !strings.Contains(logs[0], "no space left") || !strings.Contains(logs[1], "losing 3") {
		t.Errorf("logs = %q, want one failure line and one recovery line", logs)
	}
	// Each torn fragment costs one unreadable line (the next write ends it
	// with a newline); the events around them survive intact.
	os.WriteFile(path, ff.bytes(), 0o600)
	evs, skipped, err := Read(path, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].PID != 0 || evs[1].PID != 4 {
		t.Errorf("events after the failure streak = %+v, want pids 0 and 4", evs)
	}
	if skipped != 3 {
		t.Errorf("skipped = %d, want 3 (one per torn write)", skipped)
	}
}

func TestOversizedEventDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	j := mustOpen(t, path, Options{Limits: Limits{MaxBytes: 1024}})
	ev := event(0)
	ev.Detail = strings.Repeat("y", 2000)
	j.Observe(ev)
	j.Observe(event(1))
	j.Close()
	if j.Dropped() != 1 {
		t.Errorf("Dropped = %d, want 1", j.Dropped())
	}
	evs, _, _ := Read(path, time.Time{})
	if len(evs) != 1 || evs[0].PID != 1 {
		t.Errorf("events = %+v", evs)
	}
}

// BenchmarkMillionEvents writes b.N events (a million with -benchtime
// 1000000x) with the default options and checks the size bound at the end:
// go test ./journal -run '^$' -bench MillionEvents -benchtime 1000000x
func BenchmarkMillionEvents(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	j, err := Open(path, Options{Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	ev := event(0)
	ev.Stderr = []string{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev.PID = i
		j.Observe(ev)
		if i%512 == 0 {
			j.Flush()
		}
	}
	j.Close()
	b.StopTimer()
	total := journalSize(b, dir)
	if bound := int64(DefaultMaxBytes * (DefaultMaxFiles + 1)); total > bound {
		b.Fatalf("journal holds %d bytes, bound %d", total, bound)
	}
	b.ReportMetric(float64(total)/(1<<20), "MiB-on-disk")
	b.ReportMetric(float64(j.Dropped()), "dropped")
}

var _ supervisor.Observer = (*Journal)(nil)

// BenchmarkAdmissions compares granted admissions, which the journal
// summarises into a line a second, with the same admissions written one
// line each (decision cpu is never summarised: it stands for what every
// grant cost before). Nothing rotates away, so disk-B/event is what each
// admission costs the journal:
// go test ./journal -run '^$' -bench Admissions -benchtime 200000x
func BenchmarkAdmissions(b *testing.B) {
	for _, decision := range []string{"gpu", "cpu"} {
		name := map[string]string{"gpu": "summarised", "cpu": "line-each"}[decision]
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			j, err := Open(filepath.Join(dir, "events.jsonl"), Options{Limits: Limits{MaxFiles: MaxRetained}, Logf: b.Logf})
			if err != nil {
				b.Fatal(err)
			}
			ev := api.Event{Time: time.Now(), Name: "llama", Event: api.EventAdmission, Profile: "fp16",
				Decision: decision, Bytes: 2 << 30, Priority: "P1", Tool: "embedder", Lease: "0869ccf112af281297ac824c4966d784"}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ev.Time = time.Now()
				j.Observe(ev)
				if i%512 == 0 {
					j.Flush()
				}
			}
			j.Close()
			b.StopTimer()
			b.ReportMetric(float64(journalSize(b, dir))/float64(b.N), "disk-B/event")
			b.ReportMetric(float64(j.Dropped()), "dropped")
		})
	}
}

// TestStalledDiskDropsPastTheQueue: while a write hangs (a stalled disk),
// Observe never blocks the supervisor: the queue holds queueLen events and
// the rest are dropped and counted (docs/operations.md).
func TestStalledDiskDropsPastTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{})
		f := m.file(path)
		f.gate = make(chan struct{})
		j.Observe(event(0))
		synctest.Wait() // the writer is stuck in its first write
		const extra = 10
		for i := 1; i <= queueLen+extra; i++ {
			j.Observe(event(i)) // a blocking send here would deadlock the bubble
		}
		if d := j.Dropped(); d != extra {
			t.Errorf("Dropped = %d while the disk stalls, want %d", d, extra)
		}
		close(f.gate)
		j.Close()
		if n := strings.Count(string(f.bytes()), "\n"); n != queueLen+1 {
			t.Errorf("%d lines written, want %d (the one in flight and the queue)", n, queueLen+1)
		}
	})
}
