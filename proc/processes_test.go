package proc

import (
	"slices"
	"testing"
)

func TestProcessesWithoutCgroupIsTheTree(t *testing.T) {
	c, err := Start(Spec{Argv: []string{"/bin/sh", "-c", "sleep 30 & wait"}, Cgroups: nil})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Kill(); <-c.Done() }()
	if c.Cgroup() != "" {
		t.Skip("started in a cgroup")
	}
	pids, err := c.Processes()
	if err != nil || len(pids) == 0 || pids[0] != c.PID() {
		t.Fatalf("Processes: %v %v, want the main pid first", pids, err)
	}
	tree, _ := Tree(c.PID())
	if !slices.Equal(pids, tree) {
		t.Errorf("Processes %v, Tree %v", pids, tree)
	}
}
