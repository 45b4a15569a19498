package e2e

// Helpers of the process-fault reliability tests (docs/reliability.md).
// Their names start with pf so they stay apart from other tests' helpers.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/testbin"
)

// pfSoak reports whether the long versions run (GPUGUARD_SOAK=1, as
// scripts/soak.sh sets it).
func pfSoak() bool { return os.Getenv("GPUGUARD_SOAK") == "1" }

// pfSize is short in the default run and long under GPUGUARD_SOAK=1; a
// positive GPUGUARD_SOAK_<NAME> overrides both.
func pfSize(name string, short, long int) int {
	if v, err := strconv.Atoi(os.Getenv("GPUGUARD_SOAK_" + name)); err == nil && v > 0 {
		return v
	}
	if pfSoak() {
		return long
	}
	return short
}

// pfEventually polls cond until it holds or d passes.
func pfEventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

// pfStat is what /proc/<pid>/stat says about a process.
type pfStat struct {
	state      byte
	ppid, pgrp int
}

// pfReadStat reads /proc/<pid>/stat; ok is false when the process is gone.
func pfReadStat(pid int) (pfStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pfStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 3 {
		return pfStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return pfStat{state: f[0][0], ppid: ppid, pgrp: pgrp}, true
}

// pfAlive reports whether pid exists and is not a zombie (a killed process
// whose parent is gone stays a zombie until init reaps it).
func pfAlive(pid int) bool {
	st, ok := pfReadStat(pid)
	return ok && st.state != 'Z'
}

// pfGone waits up to d for pid to die.
func pfGone(pid int, d time.Duration) bool {
	return pfEventually(d, func() bool { return !pfAlive(pid) })
}

// pfKill kills pid at the end of the test, in case it survived.
func pfKill(t *testing.T, pids ...int) {
	t.Cleanup(func() {
		for _, pid := range pids {
			if pid > 0 && pfAlive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// pfChildren lists pid's children with their stat.
func pfChildren(pid int) map[int]pfStat {
	out := map[int]pfStat{}
	names, _ := os.ReadDir("/proc")
	for _, n := range names {
		p, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		if st, ok := pfReadStat(p); ok && st.ppid == pid {
			out[p] = st
		}
	}
	return out
}

// pfZombies counts pid's children that are zombies.
func pfZombies(pid int) int {
	n := 0
	for _, st := range pfChildren(pid) {
		if st.state == 'Z' {
			n++
		}
	}
	return n
}

// pfStatus reads a "Key:  value kB" field of /proc/<pid>/status as a number.
func pfStatus(pid int, key string) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return -1
}

// pfCgroup is the cgroup v2 path of pid ("" when unknown).
func pfCgroup(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// pfInChildCgroup reports whether pid runs in a cgroup gpuguard made.
func pfInChildCgroup(pid int) bool {
	return strings.Contains(pfCgroup(pid), "/gpuguard-")
}

// pfFields parses "k=v k=v" into a map of ints.
func pfFields(t *testing.T, line string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("field %s in %q", f, line)
		}
		out[k] = n
	}
	return out
}

// pfModes are the cleanup modes to test: with a cgroup per child where
// this machine allows it, and with process groups only
// (GPUGUARD_CGROUP=off). The cgroup mode is skipped, with the reason, when
// cgroup v2 is not writable here.
func pfModes(t *testing.T) []pfMode {
	modes := []pfMode{{name: "pgroup", env: []string{"GPUGUARD_CGROUP=off"}}}
	if why := pfCgroupsUnusable(); why != "" {
		t.Logf("cgroup mode skipped: %s", why)
		return modes
	}
	return append([]pfMode{{name: "cgroup", cgroup: true}}, modes...)
}

type pfMode struct {
	name   string
	env    []string
	cgroup bool
}

// pfCgroupsUnusable says why gpuguard cannot make cgroups here, or "".
func pfCgroupsUnusable() string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, " - cgroup2 ") {
			continue
		}
		mnt := strings.Fields(line)[4]
		dir := mnt + pfCgroup(os.Getpid())
		if syscall.Access(dir, 2) != nil {
			return "own cgroup " + dir + " is not writable"
		}
		if _, err := os.Stat(dir + "/cgroup.kill"); err != nil && dir != mnt && dir != mnt+"/" {
			return "no cgroup.kill (Linux 5.14+)"
		}
		return ""
	}
	return "no cgroup2 mount"
}

// pfPlain is, built once, a gpuguard without the race detector (or the one
// testbin.BinEnv names): its memory figures are the ones a user sees (the
// race runtime's grow with every goroutine ever started, ~2 KB per
// restart).
var pfPlain = sync.OnceValues(func() (string, error) {
	path, err := testbin.Binary(buildDir, "..", false)
	if err != nil {
		return "", fmt.Errorf("building gpuguard without -race: %w", err)
	}
	return path, nil
})

// pfStartWith is e.start with another binary: `run` gets the sandbox's
// dirs. stdout is an os.Pipe whose reader does not race with Wait.
func pfStartWith(e *env, binary string, args []string, extraEnv ...string) *proc {
	e.t.Helper()
	if len(args) > 0 && args[0] == "run" {
		args = append([]string{"run", "--state-dir", e.stateDir, "--runtime-dir", e.runDir}, args[1:]...)
	}
	cmd := exec.Command(binary, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), extraEnv...)
	r, w, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	p := &proc{t: e.t, cmd: cmd, lines: make(chan string, 1000), stderr: &testbin.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w, p.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	w.Close()
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		r.Close()
		close(p.lines)
	}()
	go func() {
		p.code = exitCode(cmd.Wait())
		close(p.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}
