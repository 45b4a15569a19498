package proc

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestProcessesWithoutCgroupIsTheTree(t *testing.T) {
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
	pids, err := c.Processes()
	if err != nil || !slices.Equal(pids, []int{c.PID(), gc}) {
		t.Fatalf("Processes: %v %v, want [%d %d]", pids, err, c.PID(), gc)
	}
}
