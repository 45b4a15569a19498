package proc

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParsePPID(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want int
		ok   bool
	}{
		{"1 (systemd) S 0 1 1 0 -1 4194560", 0, true},
		{"4242 (python3) R 17 4242 4242 34816", 17, true},
		{"99 (a) (b) S 7 99 99", 7, true},
		{"99 (x) 12) S 8 99", 8, true},
		{"99 (sp ace) Z 9", 9, true},
		{"99 (" + strings.Repeat("x", 64) + ") S 10 " + strings.Repeat("1 ", 200), 10, true},
		{"99 no paren S 1", 0, false},
		{"99 (x) S", 0, false},
		{"99 (x) S abc", 0, false},
		{"", 0, false},
	} {
		got, err := parsePPID([]byte(tc.stat))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parsePPID(%q) = %d, %v", tc.stat, got, err)
		}
	}
}

// fakeProc writes a /proc-like tree: pid -> ppid.
func fakeProc(t *testing.T, procs map[int]int) string {
	t.Helper()
	root := t.TempDir()
	for pid, ppid := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := strconv.Itoa(pid) + " (w (" + strconv.Itoa(pid) + ")) S " + strconv.Itoa(ppid) + " 1 1 0\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not processes: skipped.
	os.Mkdir(filepath.Join(root, "self"), 0o755)
	os.WriteFile(filepath.Join(root, "uptime"), []byte("1 1\n"), 0o644)
	os.Mkdir(filepath.Join(root, "12345"), 0o755) // exited: no stat
	return root
}

func TestTreeFake(t *testing.T) {
	root := fakeProc(t, map[int]int{1: 0, 10: 1, 11: 10, 12: 10, 13: 11, 14: 13, 20: 1, 21: 20})
	got, err := tree(root, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 10 {
		t.Errorf("tree starts with %d", got[0])
	}
	pos := func(p int) int { return slices.Index(got, p) }
	if pos(11) > pos(13) || pos(13) > pos(14) {
		t.Errorf("parents not before children: %v", got)
	}
	slices.Sort(got)
	if want := []int{10, 11, 12, 13, 14}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := tree(root, 21); err != nil || !slices.Equal(got, []int{21}) {
		t.Errorf("leaf: %v, %v", got, err)
	}
	if _, err := tree(root, 99); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing pid: %v", err)
	}
}

func TestTreeReal(t *testing.T) {
	t.Parallel()
	out := newLines()
	spec := sh(`sleep 1000 & echo $!
sh -c 'sleep 1000 & echo $!; wait' & echo $!
wait`)
	spec.Stdout = out
	c := start(t, spec)
	want := []int{c.PID(), out.nextPID(t), out.nextPID(t), out.nextPID(t)}
	got, err := Tree(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Tree = %v, want %v", got, want)
	}
	c.Kill()
	wait(t, c)
	if _, err := Tree(c.PID()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Tree of a reaped child: %v", err)
	}
}

func BenchmarkTree(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if _, err := Tree(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTreeChildrenFiles measures the alternative Tree does not use:
// walking /proc/<pid>/task/<tid>/children from pid down.
func BenchmarkTreeChildrenFiles(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		out := []int{pid}
		for i := 0; i < len(out); i++ {
			tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(out[i]) + "/task/*/children")
			for _, f := range tasks {
				b, _ := os.ReadFile(f)
				for _, s := range strings.Fields(string(b)) {
					n, _ := strconv.Atoi(s)
					out = append(out, n)
				}
			}
		}
	}
}
