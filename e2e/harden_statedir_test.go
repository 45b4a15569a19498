package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStateDirOfAnotherUser: as root, a state dir owned by another uid
// (65534) is refused, exit 1, naming the dir and its owner, and nothing is
// written in it; so is a dir of ours that others may write to. Before,
// gpuguard used it as it was, and the user who owned it could plant links
// for root to write through.
func TestStateDirOfAnotherUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a dir of another uid")
	}
	e := newEnv(t)
	pol := e.policy(ladder)
	if err := os.Mkdir(e.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(e.stateDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "sd"}, sh("exit 0")...))
	if code != 1 || !strings.Contains(stderr, e.stateDir) || !strings.Contains(stderr, "uid 65534") {
		t.Fatalf("exit %d, stderr %q; want 1 naming the dir and uid 65534", code, stderr)
	}
	if ents, _ := os.ReadDir(e.stateDir); len(ents) != 0 {
		t.Errorf("gpuguard wrote %v in the refused dir", ents)
	}
	if err := os.Chown(e.stateDir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.stateDir, 0o777); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = e.run(append([]string{"run", "--policy", pol, "--name", "sd"}, sh("exit 0")...))
	if code != 1 || !strings.Contains(stderr, e.stateDir) || !strings.Contains(stderr, "writable by group or others") {
		t.Fatalf("a 0777 dir: exit %d, stderr %q", code, stderr)
	}
}

// TestStateDirLinksNotFollowed: links planted in a state dir are never
// written through: an events.jsonl link stops the start (exit 1) with its
// target untouched; a state.json link is replaced by the state file; a
// checkpoint.1 link is moved along as a link; and the generation a restart
// makes is 0600, though the checkpoint is 0644.
func TestStateDirLinksNotFollowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder + "[checkpoint]\nkeep = 3\n")
	if err := os.Mkdir(e.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	precious := e.path("precious")
	if err := os.WriteFile(precious, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(e.stateDir, "events.jsonl")
	if err := os.Symlink(precious, journal); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "ln"}, sh("exit 0")...))
	if code != 1 || !strings.Contains(stderr, "symlink") {
		t.Fatalf("journal link: exit %d, stderr %q; want 1 naming the link", code, stderr)
	}
	os.Remove(journal)
	for _, name := range []string{"state.json", "checkpoint.1"} {
		if err := os.Symlink(precious, filepath.Join(e.stateDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// The first child saves a checkpoint and crashes; the second exits 0.
	script := `if [ "$GPUGUARD_RESTARTS" = 0 ]; then echo data > "$GPUGUARD_CHECKPOINT"; chmod 644 "$GPUGUARD_CHECKPOINT"; exit 3; fi; exit 0`
	if code, _, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "ln"}, sh(script)...)); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(precious); string(b) != "keep me\n" {
		t.Errorf("a link's target now holds %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(e.stateDir, "state.json")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("state.json: %v, %v; want the state file in place of the link", fi.Mode(), err)
	}
	if fi, err := os.Lstat(filepath.Join(e.stateDir, "checkpoint.1")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint.1: %v, %v; want a 0600 generation", fi.Mode(), err)
	}
	if fi, err := os.Lstat(filepath.Join(e.stateDir, "checkpoint.2")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("checkpoint.2: %v, %v; want the planted link, moved along", fi.Mode(), err)
	}
}

// mountOrSkip runs mount(8) with args, or skips the test where mounting
// is not allowed (not root, no CAP_SYS_ADMIN).
func mountOrSkip(t *testing.T, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Skipf("mount %v: %v: %s", args, err, out)
	}
}

func umount(t *testing.T, dir string) {
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}

// notifyChild reports each notification with the state file it reads.
const notifyChild = `trap 'echo "notified $(cat "$GPUGUARD_STATE")"' USR1
trap 'exit 0' TERM
echo up
while :; do sleep 0.02; done
`

// TestStepWithoutStateFile: on a full tmpfs, and on a read-only state
// dir, `gpuguard step` exits 1 naming the reason, and the child gets no
// signal: the first notification it sees is for the step that worked once
// the state file could be written again, at level 1. Before, the step
// said ok, the child got SIGUSR1 and read the old profile.
func TestStepWithoutStateFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, says string }{{"full", "no space left"}, {"read-only", "read-only file system"}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			pol := e.policy(ladder)
			if err := os.Mkdir(e.stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if c.name == "full" {
				mountOrSkip(t, "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", e.stateDir)
				umount(t, e.stateDir)
			}
			p := e.start(append([]string{"run", "--policy", pol, "--name", "sf", "--sim-dir", e.path("sim")}, sh(notifyChild)...))
			p.expect("up")
			waitFor(t, "the state file", 30*time.Second, func() bool {
				_, err := os.Stat(filepath.Join(e.stateDir, "state.json"))
				return err == nil
			})
			fill := filepath.Join(e.stateDir, "fill")
			if c.name == "full" {
				exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=4k").Run() // until ENOSPC
			} else {
				mountOrSkip(t, "--bind", e.stateDir, e.stateDir)
				umount(t, e.stateDir)
				mountOrSkip(t, "-o", "remount,ro,bind", e.stateDir)
			}
			code, out, stderr := e.run([]string{"step", "sf", "down", "--runtime-dir", e.runDir})
			if code != 1 || !strings.Contains(stderr, c.says) || !strings.Contains(stderr, "state file") {
				t.Fatalf("step on a %s state dir: exit %d, %q, %q; want 1 naming the reason", c.name, code, out, stderr)
			}
			if c.name == "full" {
				os.Remove(fill)
			} else if out, err := exec.Command("umount", e.stateDir).CombinedOutput(); err != nil {
				t.Fatalf("umount: %v %s", err, out)
			}
			if code, out, stderr := e.run([]string{"step", "sf", "down", "--runtime-dir", e.runDir}); code != 0 || strings.TrimSpace(out) != "int8" {
				t.Fatalf("step once writable: exit %d, %q, %s", code, out, stderr)
			}
			l := p.expect("notified ")
			var st struct {
				Level int `json:"level"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "notified ")), &st); err != nil || st.Level != 1 {
				t.Fatalf("first notification %q: want level 1 (no signal for the refused step)", l)
			}
			p.signal(syscall.SIGTERM)
			if code := p.wait(); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	}
}

// oomBySocket is a child that says OOM on its socket (a connection of its
// own, as the Python client does) once $OUT.oom appears, then exits 1:
// an exit that counts as OOM only if the message got through.
const oomBySocket = `trap 'exit 0' TERM
echo "up $GPUGUARD_PROFILE $GPUGUARD_LAST_EXIT"
until [ -e "$OUT.oom" ]; do sleep 0.02; done
python3 -c '
import json, os, socket
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(os.environ["GPUGUARD_SOCKET"])
s.sendall(b"{\"type\":\"oom\",\"detail\":\"test\"}\n")
print("oom reply", s.makefile().readline().strip(), flush=True)
'
exit 1
`

// TestSlowConnectionsShutNobodyOut: 128 connections that each send a byte
// and no newline hold every connection of the socket. The child's own oom
// message still gets through (its exit restarts one profile lower, as an
// OOM), and `gpuguard status` still shows the instance, not unreachable.
// Before, both were refused and a real OOM counted as a crash.
func TestSlowConnectionsShutNobodyOut(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	e := newEnv(t)
	pol := e.policy(ladder)
	p := e.start(append([]string{"run", "--policy", pol, "--name", "slow"}, sh(oomBySocket)...))
	p.expect("up fp16 none")
	sock := filepath.Join(e.runDir, "slow.sock")
	for range 128 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write([]byte("{"))
	}
	// One more line that is not a lane type is refused: every connection is held.
	waitFor(t, "the connections all held", 30*time.Second, func() bool {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(`{"type":"reserve","bytes":1}` + "\n"))
		b := make([]byte, 200)
		n, _ := c.Read(b)
		return strings.Contains(string(b[:n]), "too many connections")
	})
	code, out, stderr := e.run([]string{"status", "slow", "--json", "--runtime-dir", e.runDir})
	if code != 0 || strings.Contains(out, "unreachable") || !strings.Contains(out, `"name": "slow"`) && !strings.Contains(out, `"name":"slow"`) {
		t.Fatalf("status with every connection held: exit %d, %s, %s", code, out, stderr)
	}
	if err := os.WriteFile(e.path("out.oom"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if l := p.expect("oom reply"); !strings.Contains(l, `"ok":true`) {
		t.Fatalf("the child's oom: %s", l)
	}
	p.expect("up int8 oom")
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestSocketBoundsOfTheRealServer: over the real socket of a running
// instance, a 257-byte tool and a 25 h ttl get error replies, and a
// 65,536-byte line ending in CRLF is answered like the same line ending in
// LF. Under GPUGUARD_SOAK=1, 10,000 one-byte leases are granted first and
// the next is denied ("too many leases"), whatever its priority (a grant
// writes the lease file the other tenants read: about 6 ms each on the
// loaded race build, a minute for 10,000; the unit tests check the bound
// in every run).
func TestSocketBoundsOfTheRealServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	p := e.start(append([]string{"run", "--policy", pol, "--name", "lb"}, sh(notifyChild)...))
	p.expect("up")
	waitFor(t, "a first sample", 30*time.Second, func() bool {
		st, err := e.statusOf("lb")
		return err == nil && len(st.GPUs) > 0 && st.State == "running"
	})
	c, err := net.Dial("unix", filepath.Join(e.runDir, "lb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<20)
	leases := 0
	if pfSoak() {
		leases = 10_000
	}
	go func() { // pipelined: the replies come in order
		w := bufio.NewWriter(c)
		for range leases {
			w.WriteString(`{"type":"reserve","bytes":1,"ttl":"1h","priority":"P1"}` + "\n")
		}
		if leases > 0 {
			w.WriteString(`{"type":"reserve","bytes":1,"priority":"P0"}` + "\n")
		}
		w.WriteString(`{"type":"reserve","bytes":1,"tool":"` + strings.Repeat("t", 257) + `"}` + "\n")
		w.WriteString(`{"type":"reserve","bytes":1,"ttl":"25h"}` + "\n")
		pad := `{"type":"status","pad":"`
		line := pad + strings.Repeat("x", 65536-len(pad)-2) + `"}`
		w.WriteString(line + "\r\n")
		w.Flush()
	}()
	c.SetReadDeadline(time.Now().Add(60*time.Second + time.Duration(leases)*20*time.Millisecond))
	n := 0
	reply := func() map[string]any {
		t.Helper()
		l, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading reply %d: %v", n+1, err)
		}
		n++
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("reply %q: %v", l, err)
		}
		return m
	}
	for i := range leases {
		if m := reply(); m["decision"] != "gpu" {
			t.Fatalf("lease %d: %v", i+1, m)
		}
	}
	if leases > 0 {
		if m := reply(); m["decision"] != "deny" || !strings.HasPrefix(fmt.Sprint(m["reason"]), "too many leases") {
			t.Errorf("lease 10,001 (P0): %v, want deny, too many leases", m)
		}
	}
	for _, want := range []string{"at most 256", "at most 24h0m0s"} {
		if m := reply(); m["ok"] != false || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("%v, want an error saying %q", m, want)
		}
	}
	if m := reply(); m["ok"] != true || m["name"] != "lb" || m["leases"] != float64(leases) {
		t.Errorf("a 65,536-byte CRLF line: %.200v, want the status with %d leases", m, leases)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
}
