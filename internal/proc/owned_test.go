package proc

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestDescendantsOnAFakeProc(t *testing.T) {
	root := t.TempDir()
	// 10 -> 11 -> 12, 10 -> 13; 20 -> 21 (another tree); 30's parent is gone.
	for pid, ppid := range map[int]int{10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20, 30: 99} {
		d := filepath.Join(root, strconv.Itoa(pid))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "stat"), []byte(strconv.Itoa(pid)+" (a b) S "+strconv.Itoa(ppid)+" 0 0\n"), 0o644)
	}
	got := descendants(root, 10, []int{12, 21, 10, 13, 30, 404})
	if want := []int{12, 10, 13}; !slices.Equal(got, want) {
		t.Fatalf("descendants of 10: %v, want %v", got, want)
	}
	if got := descendants(root, 20, []int{12, 21}); !slices.Equal(got, []int{21}) {
		t.Fatalf("descendants of 20: %v", got)
	}
}

func TestOwnedWithoutCgroupIsTheTree(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := Start(Spec{Argv: []string{"/bin/sh", "-c", "sleep 30 & echo $!; wait"}, Stdout: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Kill(); <-c.Done() }()
	if c.Cgroup() != "" {
		t.Skip("started in a cgroup")
	}
	line, _ := bufio.NewReader(r).ReadString('\n') // the grandchild exists now
	gc, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("grandchild pid %q", line)
	}
	got := c.Owned([]int{os.Getpid(), gc, c.PID(), 1})
	if want := []int{gc, c.PID()}; !slices.Equal(got, want) {
		t.Fatalf("Owned: %v, want %v (not the test process, not init)", got, want)
	}
}
