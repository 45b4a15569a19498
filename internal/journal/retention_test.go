package journal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestRetained(t *testing.T) {
	m := time.Minute
	tests := []struct {
		name     string
		ages     []time.Duration
		maxFiles int
		maxAge   time.Duration
		keep     int
		capped   bool
	}{
		{"count only", []time.Duration{0, m, 2 * m, 3 * m}, 2, 0, 2, false},
		{"fewer files than max_files", []time.Duration{0}, 4, 0, 1, false},
		{"max_files 0 keeps none", []time.Duration{0, m}, 0, 0, 0, false},
		{"age keeps the young past max_files", []time.Duration{0, m, 2 * m, 3 * m, 4 * m}, 1, 150 * time.Second, 3, false},
		{"exactly max_age old goes", []time.Duration{0, m, 2 * m}, 0, 2 * m, 2, false},
		{"age never keeps fewer than max_files", []time.Duration{0, time.Hour, 2 * time.Hour}, 3, m, 3, false},
		{"the first old file ends the run", []time.Duration{0, time.Hour, m}, 1, 10 * m, 1, false},
		{"max_files 0 with an age", []time.Duration{0, 2 * m}, 0, m, 1, false},
		{"the ceiling", make([]time.Duration, MaxRetained+5), 2, time.Hour, MaxRetained, true},
		{"the ceiling is max_files when larger", make([]time.Duration, 1205), 1200, time.Hour, 1200, true},
		{"at the ceiling exactly, nothing young is lost", make([]time.Duration, MaxRetained), 2, time.Hour, MaxRetained, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep, capped := retained(tt.ages, tt.maxFiles, tt.maxAge, MaxRetained)
			if keep != tt.keep || capped != tt.capped {
				t.Errorf("retained = %d, %v; want %d, %v", keep, capped, tt.keep, tt.capped)
			}
		})
	}
}

// lines returns the PIDs written to one file of a memFS journal, in order.
func pids(t *testing.T, m *memFS, name string) []int {
	t.Helper()
	f := m.file(name)
	if f == nil {
		t.Fatalf("%s does not exist; files: %v", name, m.names())
	}
	var out []int
	for _, l := range strings.Split(strings.TrimSpace(string(f.bytes())), "\n") {
		ev, ok := parseLine([]byte(l), true)
		if !ok || ev == nil {
			t.Fatalf("%s: bad line %q", name, l)
		}
		out = append(out, ev.PID)
	}
	return out
}

// openMem opens a journal on a fresh memFS.
func openMem(t *testing.T, opts Options) (*Journal, *memFS, string) {
	t.Helper()
	m := newMemFS()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	j, err := open(path, opts, m)
	if err != nil {
		t.Fatal(err)
	}
	return j, m, path
}

// lineSize is the size of the line of event(i) for a one-digit i.
func lineSize() int64 {
	b, _ := json.Marshal(event(1))
	return int64(len(b)) + 1
}

// TestRetentionBySizeAndCount: each file holds what fits in MaxBytes, the
// newest rotated file is .1, and only MaxFiles rotated files are kept.
func TestRetentionBySizeAndCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two one-digit lines fit a file, a third does not.
		j, m, path := openMem(t, Options{Limits: Limits{MaxBytes: 2*lineSize() + 5, MaxFiles: 2}})
		for i := range 9 {
			j.Observe(event(i))
		}
		j.Close()
		want := []string{path, rotated(path, 1), rotated(path, 2)}
		if got := m.names(); !slices.Equal(got, want) {
			t.Fatalf("files %v, want %v", got, want)
		}
		for name, want := range map[string][]int{path: {8}, rotated(path, 1): {6, 7}, rotated(path, 2): {4, 5}} {
			if got := pids(t, m, name); !slices.Equal(got, want) {
				t.Errorf("%s holds %v, want %v", name, got, want)
			}
		}
	})
}

func TestRetentionMaxFilesNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{Limits: Limits{MaxBytes: lineSize() + 5, MaxFiles: -1}})
		for i := range 5 {
			j.Observe(event(i))
		}
		j.Close()
		if got := m.names(); !slices.Equal(got, []string{path}) {
			t.Fatalf("files %v, want only the current one", got)
		}
		if got := pids(t, m, path); !slices.Equal(got, []int{4}) {
			t.Errorf("current file holds %v", got)
		}
	})
}

// TestRetentionByAge: with max_age, a rotated file is kept until it is
// max_age old even past max_files, during a flood and after it; once old,
// it goes at the next rotation.
func TestRetentionByAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{Limits: Limits{MaxBytes: lineSize() + 5, MaxFiles: 1, MaxAge: time.Hour}})
		defer j.Close()
		// One line a file: every event after the first rotates. Ten
		// minutes between lines: at minute 90 the files whose line is
		// 10 .. 50 minutes old are younger than an hour, the one of
		// minute 30 is not.
		for i := range 9 {
			j.Observe(event(i))
			j.Flush()
			time.Sleep(10 * time.Minute)
		}
		j.Observe(event(9))
		j.Flush()
		got := m.names()
		want := []string{path}
		for n := 1; n <= 5; n++ {
			want = append(want, rotated(path, n))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("after 90 min: files %v, want the current one and .1 .. .5", got)
		}
		if p := pids(t, m, rotated(path, 5)); !slices.Equal(p, []int{4}) {
			t.Errorf(".5 holds %v, want the event of minute 40", p)
		}

		// A flood: 200 rotations at once keep all of it (a count rule
		// alone would have kept one file).
		for i := range 200 {
			j.Observe(event(10 + i))
			if i%100 == 0 {
				j.Flush()
			}
		}
		j.Flush()
		if n := len(m.names()); n != 1+200+5 {
			t.Fatalf("after a flood: %d files, want 206 (the current one, 200 new, 5 young)", n)
		}

		// Two hours later every rotated file is old: the next rotation
		// leaves max_files.
		time.Sleep(2 * time.Hour)
		j.Observe(event(1000))
		j.Flush()
		if got := m.names(); !slices.Equal(got, []string{path, rotated(path, 1)}) {
			t.Fatalf("after the age: files %v, want the current one and .1", got)
		}
	})
}

// TestRetentionCeiling: max_age keeps at most MaxRetained rotated files
// (here a lower ceiling), and says so once.
func TestRetentionCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu   sync.Mutex
			logs []string
		)
		logf := func(format string, args ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		const ceiling = 50
		j, m, _ := openMem(t, Options{Limits: Limits{MaxBytes: 2 * lineSize(), MaxFiles: 1, MaxAge: 24 * time.Hour}, Logf: logf, ceiling: ceiling})
		for range ceiling + 20 {
			j.Observe(event(1))
		}
		j.Close()
		if n := len(m.names()); n != ceiling+1 {
			t.Errorf("%d files, want %d rotated and the current one", n, ceiling)
		}
		if len(logs) != 1 || !strings.Contains(logs[0], "younger than max_age") {
			t.Errorf("logs = %q, want one line about the ceiling", logs)
		}
	})
}

// TestOpenAppliesRetention: a policy that keeps fewer files applies when
// the journal opens, by count and by the files' age on disk.
func TestOpenAppliesRetention(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	now := time.Now()
	for n := 1; n <= 6; n++ {
		name := rotated(path, n)
		if err := os.WriteFile(name, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		age := time.Duration(n) * 24 * time.Hour // .n is n days old
		if err := os.Chtimes(name, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	j := mustOpen(t, path, Options{Limits: Limits{MaxFiles: 2, MaxAge: 4*24*time.Hour - time.Minute}})
	j.Close()
	for n := 1; n <= 6; n++ {
		_, err := os.Stat(rotated(path, n))
		if kept := err == nil; kept != (n <= 3) {
			t.Errorf(".%d kept = %v, want %v (2 files, and those under 4 days old)", n, kept, n <= 3)
		}
	}
}

// TestSetLimits: limits changed on a running journal apply at once: fewer
// files kept removes the rotated files beyond them before the next line,
// and a smaller size rotates at the next line that does not fit.
func TestSetLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j, m, path := openMem(t, Options{Limits: Limits{MaxBytes: lineSize() + 5, MaxFiles: 4}})
		defer j.Close()
		for i := range 6 {
			j.Observe(event(i))
		}
		j.Flush()
		if n := len(m.names()); n != 5 {
			t.Fatalf("%d files before, want the current one and 4 rotated: %v", n, m.names())
		}
		j.SetLimits(Limits{MaxBytes: 3 * lineSize(), MaxFiles: 1})
		j.Flush()
		if got := m.names(); !slices.Equal(got, []string{path, rotated(path, 1)}) {
			t.Fatalf("after max_files 1: files %v, want the current one and .1", got)
		}
		// Two lines go to a file now (three lines' size, less the margin
		// each write keeps) where one did before.
		for i := 6; i < 9; i++ {
			j.Observe(event(i))
		}
		j.Flush()
		if got := pids(t, m, path); !slices.Equal(got, []int{7, 8}) {
			t.Errorf("current file holds %v, want 7 and 8", got)
		}
		// Zero values are the defaults, as at Open: 16 MiB files.
		j.SetLimits(Limits{})
		for i := range 200 {
			j.Observe(event(i % 10))
		}
		j.Flush()
		if got := m.names(); !slices.Equal(got, []string{path, rotated(path, 1)}) {
			t.Errorf("with the default size nothing more rotates: files %v", got)
		}
	})
}
