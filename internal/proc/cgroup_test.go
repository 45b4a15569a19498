package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCgroupParent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "cg")
	for _, sub := range []string{"", "user.slice/app.scope", "inner", "etc"} {
		if err := os.MkdirAll(filepath.Join(mnt, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	v1 := "30 25 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	mountinfo := func(root string) string {
		return v1 + "35 25 0:30 " + root + " " + strings.ReplaceAll(mnt, " ", `\040`) + " rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
	}
	for _, tc := range []struct {
		name, mountinfo, cgroup, parent, want, err string
	}{
		{name: "own", mountinfo: mountinfo("/"), cgroup: "1:memory:/x\n0::/user.slice/app.scope\n", want: "user.slice/app.scope"},
		{name: "root", mountinfo: mountinfo("/"), cgroup: "0::/\n", want: ""},
		{name: "container without cgroupns", mountinfo: mountinfo("/docker/abc"), cgroup: "0::/docker/abc/inner\n", want: "inner"},
		{name: "outside the mounted tree", mountinfo: mountinfo("/docker/abc"), cgroup: "0::/other\n", err: "outside"},
		{name: "relative parent", mountinfo: mountinfo("/"), cgroup: "0::/\n", parent: "etc", want: "etc"},
		{name: "absolute parent", mountinfo: mountinfo("/"), cgroup: "0::/\n", parent: filepath.Join(mnt, "etc"), want: "etc"},
		{name: "no cgroup2", mountinfo: v1, cgroup: "0::/\n", err: "no cgroup2"},
		{name: "no v2 entry", mountinfo: mountinfo("/"), cgroup: "1:memory:/x\n", err: "no cgroup v2 entry"},
		{name: "missing parent", mountinfo: mountinfo("/"), cgroup: "0::/\n", parent: "nope", err: "not writable"},
	} {
		mi, cg := filepath.Join(dir, "mountinfo"), filepath.Join(dir, "cgroup")
		os.WriteFile(mi, []byte(tc.mountinfo), 0o644)
		os.WriteFile(cg, []byte(tc.cgroup), 0o644)
		got, err := cgroupParent(mi, cg, tc.parent)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %q, %v; want an error with %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if want := filepath.Join(mnt, tc.want); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, want)
		}
	}
}

func TestParseStatePgrp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stat  string
		state byte
		pgrp  int
		err   bool
	}{
		{stat: "42 (sh) Z 1 40 40 0 -1", state: 'Z', pgrp: 40},
		{stat: "42 (a) b (c)) S 7 9 9", state: 'S', pgrp: 9},
		{stat: "42 (x) R 1", err: true},
		{stat: "42 x R 1 2", err: true},
	} {
		state, pgrp, err := parseStatePgrp([]byte(tc.stat))
		if (err != nil) != tc.err || state != tc.state || pgrp != tc.pgrp {
			t.Errorf("%q: %c %d %v", tc.stat, state, pgrp, err)
		}
	}
}

// openCgroups opens cgroups under gpuguard's own cgroup, or skips the test
// with the reason they are unusable here.
func openCgroups(t *testing.T) *Cgroups {
	t.Helper()
	key := fmt.Sprintf("test-%d-%s", os.Getpid(), t.Name())
	var logs bytes.Buffer
	cg, err := OpenCgroups("", key, func(f string, a ...any) { fmt.Fprintf(&logs, f+"\n", a...) })
	if err != nil {
		t.Skipf("cgroup v2 not usable here, only the process group applies: %v", err)
	}
	t.Cleanup(func() {
		if err := cg.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(cg.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("instance cgroup %s not removed: %v", cg.Dir(), err)
		}
		if logs.Len() > 0 {
			t.Logf("cgroup log:\n%s", logs.String())
		}
	})
	return cg
}

// TestCgroupKillsEscapedGrandchild: a grandchild that left the process
// group (setsid) and holds stderr is killed once the main process exits,
// and the child's cgroup is removed.
func TestCgroupKillsEscapedGrandchild(t *testing.T) {
	t.Parallel()
	cgs := openCgroups(t)
	out := newLines()
	spec := helperSpec(t, "escape")
	spec.ScanStderr, spec.Stderr, spec.Stdout, spec.Cgroups = true, new(bytes.Buffer), out, cgs
	c := start(t, spec)
	if c.Cgroup() == "" {
		t.Fatalf("child not in a cgroup: %v", cgs.Err())
	}
	gc := out.nextPID(t)
	killOnCleanup(t, gc)
	if pgid, _ := unix.Getpgid(gc); pgid == c.PID() {
		t.Fatal("the grandchild did not leave the group; the test proves nothing")
	}
	if e := wait(t, c); e.Status() != 3 {
		t.Errorf("status %d, want 3", e.Status())
	}
	waitGone(t, gc)
	if _, err := os.Stat(c.Cgroup()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("child cgroup %s still there: %v", c.Cgroup(), err)
	}
}

// TestCgroupKill: Kill reaches a grandchild outside the group while the
// main process runs.
func TestCgroupKill(t *testing.T) {
	t.Parallel()
	cgs := openCgroups(t)
	out := newLines()
	spec := sh(`setsid sleep 1000 & echo $!; exec sleep 1000`)
	spec.Stdout, spec.Cgroups = out, cgs
	c := start(t, spec)
	gc := out.nextPID(t)
	killOnCleanup(t, gc)
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	wait(t, c)
	waitGone(t, gc)
}

// mkdirCgroup makes the cgroup dir and its parents. Every gpuguard that
// opens its cgroups (another test, an e2e instance running beside) removes
// the empty instance directories of others (removeAbandoned), so a parent
// made a moment ago may be gone before its child: make both again. Once the
// child exists, the parent is not empty and stays.
func mkdirCgroup(t *testing.T, dir string) {
	t.Helper()
	var err error
	for range 20 {
		if err = os.MkdirAll(dir, 0o755); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestCgroupSweepsWhatAKilledInstanceLeft: processes left in an instance's
// cgroups (its gpuguard was SIGKILLed) are killed by the next OpenCgroups
// with the same key.
func TestCgroupSweepsWhatAKilledInstanceLeft(t *testing.T) {
	t.Parallel()
	first := openCgroups(t)
	leaf := filepath.Join(first.Dir(), "c7")
	mkdirCgroup(t, leaf)
	stray := exec.Command("sleep", "1000")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = stray.Wait(); close(exited) }()
	t.Cleanup(func() { stray.Process.Kill(); <-exited })
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0); err != nil {
		t.Skipf("cannot move a process into a cgroup here: %v", err)
	}
	key := strings.TrimPrefix(filepath.Base(first.Dir()), "gpuguard-")
	second, err := OpenCgroups("", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-exited
	if waitErr == nil || !strings.Contains(waitErr.Error(), "killed") {
		t.Errorf("stray process: %v, want killed", waitErr)
	}
	if _, err := os.Stat(leaf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale leaf %s still there: %v", leaf, err)
	}
	if second.Dir() != first.Dir() {
		t.Errorf("same key, different dirs: %s, %s", first.Dir(), second.Dir())
	}
}

// TestCgroupFallback: when the start in the cgroup is refused (here the
// "cgroup" is a plain directory, as a cgroup whose cgroup.procs is not
// writable would be), the child starts without one and cgroups are
// disabled with the reason. It runs on any machine.
func TestCgroupFallback(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	cgs := &Cgroups{dir: t.TempDir(), logf: func(f string, a ...any) { fmt.Fprintf(&logs, f, a...) }}
	var out bytes.Buffer
	spec := sh("echo ran; exit 4")
	spec.Stdout, spec.Cgroups = &out, cgs
	c := start(t, spec)
	if e := wait(t, c); e.Status() != 4 || out.String() != "ran\n" {
		t.Errorf("status %d, output %q", e.Status(), out.String())
	}
	if c.Cgroup() != "" || cgs.Err() == nil || !strings.Contains(logs.String(), "cgroup v2 cannot be used") {
		t.Errorf("cgroup %q, err %v, log %q", c.Cgroup(), cgs.Err(), logs.String())
	}
	// A command that cannot start at all is not the cgroup's fault.
	cgs2 := &Cgroups{dir: t.TempDir(), logf: func(string, ...any) {}}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 0, 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Spec{Argv: []string{garbage}, Cgroups: cgs2}); err == nil {
		t.Fatal("started garbage")
	}
	if cgs2.Err() != nil {
		t.Errorf("a failing command disabled cgroups: %v", cgs2.Err())
	}
	c2 := start(t, Spec{Argv: []string{"/bin/true"}, Cgroups: cgs})
	wait(t, c2)
	if c2.Cgroup() != "" {
		t.Error("a disabled Cgroups still made a cgroup")
	}
}

// TestCgroupRemovesAbandoned: OpenCgroups removes the empty leaves that
// other instances' dead gpuguards left, and their directories once empty,
// but never a leaf whose gpuguard lives or one that holds a process.
func TestCgroupRemovesAbandoned(t *testing.T) {
	t.Parallel()
	mine := openCgroups(t)
	base := filepath.Dir(mine.Dir())
	other := filepath.Join(base, fmt.Sprintf("gpuguard-test-%d-abandoned", os.Getpid()))
	empty := filepath.Join(base, fmt.Sprintf("gpuguard-test-%d-empty", os.Getpid()))
	dead, live, busy := filepath.Join(other, "999999999.1"), filepath.Join(other, fmt.Sprintf("%d.1", os.Getpid())), filepath.Join(other, "999999999.2")
	for _, d := range []string{dead, live, busy, empty} {
		mkdirCgroup(t, d)
	}
	t.Cleanup(func() {
		for _, d := range []string{dead, live, busy, other, empty} {
			os.Remove(d)
		}
	})
	stray := exec.Command("sleep", "1000")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stray.Process.Kill(); stray.Wait() })
	if err := os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0); err != nil {
		t.Skipf("cannot move a process into a cgroup here: %v", err)
	}
	key := strings.TrimPrefix(filepath.Base(mine.Dir()), "gpuguard-")
	if _, err := OpenCgroups("", key, nil); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{dead: false, live: true, busy: true, other: true, empty: false} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", d, err == nil, want)
		}
	}
	if !alive(stray.Process.Pid) {
		t.Error("a process in another instance's cgroup was killed")
	}
}

// TestCgroupCreateSweepsOnlyWhatWasLeft: a child's start lists the
// instance's cgroups only after a leaf could not be removed; then it kills
// and removes what is there, and the start after it lists nothing again.
func TestCgroupCreateSweepsOnlyWhatWasLeft(t *testing.T) {
	t.Parallel()
	cgs := openCgroups(t)
	planted := filepath.Join(cgs.Dir(), "planted.1")
	mkdirCgroup(t, planted)
	first := cgs.create()
	if first == nil {
		t.Fatalf("no leaf: %v", cgs.Err())
	}
	first.closeDir()
	if _, err := os.Stat(planted); err != nil {
		t.Fatalf("a start with nothing left behind swept the instance's cgroups: %v", err)
	}
	stray := exec.Command("sleep", "1000")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- stray.Wait() }()
	t.Cleanup(func() { stray.Process.Kill() })
	if err := os.WriteFile(filepath.Join(first.path, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0); err != nil {
		t.Skipf("cannot move a process into a cgroup here: %v", err)
	}
	cgs.retire(first, 0) // populated: it stays
	if _, err := os.Stat(first.path); err != nil {
		t.Fatalf("a populated leaf was removed: %v", err)
	}
	second := cgs.create()
	if second == nil {
		t.Fatalf("no leaf: %v", cgs.Err())
	}
	second.closeDir()
	if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("process left in the old leaf: %v, want killed", err)
	}
	for _, p := range []string{first.path, planted} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after the sweep: %v", p, err)
		}
	}
	cgs.retire(second, cgroupWait)
	mkdirCgroup(t, planted)
	third := cgs.create()
	third.closeDir()
	if _, err := os.Stat(planted); err != nil {
		t.Errorf("the start after a successful sweep swept again: %v", err)
	}
	cgs.retire(third, cgroupWait)
}
