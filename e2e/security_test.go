package e2e

import (
	"bufio"
	"context"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling a process's files; not synchronisation
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// peerScript connects to the socket in argv[1] and prints EACCES, or the
// first reply line: the refusal, or the answer to a status request.
const peerScript = `
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("EACCES")
    sys.exit(0)
# A refused peer is told at once; only a served one waits for a request.
# Sending first would race the server's close (ECONNRESET).
s.settimeout(5)
try:
    data = s.recv(65536)
except socket.timeout:
    s.settimeout(20)
    s.sendall(b'{"type":"status","id":1}\n')
    data = s.recv(65536)
while data and not data.endswith(b"\n"):
    more = s.recv(65536)
    if not more:
        break
    data += more
print("REPLY " + data.decode().strip())
`

// systemPython is a python3 that any uid may run (not a shim under a
// user's home).
const systemPython = "/usr/bin/python3"

// asNobody runs peerScript as uid/gid 65534 and returns its output.
func asNobody(t *testing.T, sock string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "-c", peerScript, sock)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client as uid 65534: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPrivateFilesAndPeers: the runtime dir is 0700 and the socket 0600;
// the state dir is 0700 and the state file and journal are readable by
// the owner only. A client of another uid is kept out by each layer in
// turn: the dir's mode, the socket's mode, and, with both widened by
// hand, the server's own SO_PEERCRED check.
func TestPrivateFilesAndPeers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	p := e.start(append([]string{"run", "--policy", pol, "--name", "sec"}, sh("echo up; exec sleep 300")...))
	p.expect("up")
	sock := filepath.Join(e.runDir, "sec.sock")
	state := filepath.Join(e.stateDir, "state.json")
	journal := filepath.Join(e.stateDir, "events.jsonl")
	waitFor(t, "socket, state file and journal", 30*time.Second, func() bool {
		for _, f := range []string{sock, state, journal} {
			if _, err := os.Stat(f); err != nil {
				return false
			}
		}
		return true
	})

	if m := mode(t, e.runDir); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("runtime dir mode %v, want drwx------", m)
	}
	if m := mode(t, sock); m&fs.ModeSocket == 0 || m.Perm() != 0o600 {
		t.Errorf("socket mode %v, want Srw-------", m)
	}
	if m := mode(t, e.stateDir); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("state dir mode %v, want drwx------", m)
	}
	for _, f := range []string{state, journal} {
		if m := mode(t, f); m.Perm()&0o077 != 0 {
			t.Errorf("%s mode %v: readable by group or others", filepath.Base(f), m)
		}
	}

	// The owner (root here) is served.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(`{"type":"status"}` + "\n"))
	reply, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil || !strings.Contains(reply, `"name":"sec"`) {
		t.Fatalf("status as the owner: %q %v", reply, err)
	}

	if os.Geteuid() != 0 {
		t.Skip("running a client as another uid needs root")
	}
	if _, err := os.Stat(systemPython); err != nil {
		t.Skip("no " + systemPython + " for the uid-65534 client")
	}
	// Let uid 65534 reach the runtime dir's parent, so each check below
	// is about one layer.
	if err := os.Chmod(e.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if got := asNobody(t, sock); got != "EACCES" {
		t.Errorf("uid 65534 through the 0700 runtime dir: %q, want EACCES", got)
	}
	if err := os.Chmod(e.runDir, 0o711); err != nil {
		t.Fatal(err)
	}
	if got := asNobody(t, sock); got != "EACCES" {
		t.Errorf("uid 65534 on the 0600 socket: %q, want EACCES", got)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	got := asNobody(t, sock)
	if !strings.HasPrefix(got, `REPLY {"ok":false`) || !strings.Contains(got, "uid 65534 may not use this socket") || strings.Contains(got, `"name"`) {
		t.Errorf("uid 65534 with the modes widened by hand: %q, want a refusal and nothing else", got)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
}

// TestCheckpointGenerationsArePrivate: gpuguard never widens a checkpoint:
// each generation is 0600, whatever the mode of the checkpoint it copies
// (the contract; a generation may be a copy of what a link pointed to).
func TestCheckpointGenerationsArePrivate(t *testing.T) {
	t.Parallel()
	for _, umask := range []string{"077", "027", "000"} {
		t.Run(umask, func(t *testing.T) {
			e := newEnv(t)
			pol := e.policy(ladder)
			script := `if [ "$GPUGUARD_RESTARTS" = 0 ]; then umask ` + umask + `; echo v1 > "$GPUGUARD_CHECKPOINT"; exit 1; fi`
			if code, _, stderr := e.run(append([]string{"run", "--policy", pol, "--name", "ck"}, sh(script)...)); code != 0 {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			ck := filepath.Join(e.stateDir, "checkpoint")
			orig, gen := mode(t, ck).Perm(), mode(t, ck+".1").Perm()
			if gen != 0o600 {
				t.Errorf("checkpoint %v, generation 1 %v: want 0600", orig, gen)
			}
		})
	}
}

// TestCommandNeverGoesThroughAShell: shell syntax in the command line,
// from `--` and from the policy (through ${VAR} expansion of a profile's
// env), reaches the child verbatim and runs nothing.
func TestCommandNeverGoesThroughAShell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pwned := func(n string) string { return e.path("pwned-" + n) }
	hostile := []string{
		"$(touch " + pwned("subst") + ")",
		"; touch " + pwned("semi"),
		"`touch " + pwned("backtick") + "`",
		"| touch " + pwned("pipe"),
		"&& touch " + pwned("and"),
		"> " + pwned("redirect"),
		"*",
		"$HOME",
		"'quoted' \"double\" \\back",
		"new\nline",
		"",
	}
	printf, err := exec.LookPath("printf")
	if err != nil {
		t.Skip("no printf binary")
	}
	check := func(t *testing.T, out string, want []string) {
		t.Helper()
		got := strings.Split(strings.TrimSuffix(strings.TrimSuffix(out, "\n"), "\x00"), "\x00")
		if len(got) != len(want) {
			t.Fatalf("child got %d arguments %q, want %d %q", len(got), got, len(want), want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("argument %d arrived as %q, want %q", i, got[i], want[i])
			}
		}
		for _, n := range []string{"subst", "semi", "backtick", "pipe", "and", "redirect", "env"} {
			if _, err := os.Stat(pwned(n)); err == nil {
				t.Errorf("%s exists: a shell ran part of the command line", pwned(n))
			}
		}
	}

	t.Run("command line", func(t *testing.T) {
		pol := e.policy(ladder)
		args := append([]string{"run", "--policy", pol, "--name", "sh1", "--", printf, `%s\0`}, hostile...)
		code, out, stderr := e.run(args)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		check(t, out, hostile)
	})
	t.Run("policy command and env", func(t *testing.T) {
		evil := "$(touch " + pwned("env") + "); `id`"
		pol := e.policy(`name = "sh2"
command = ["` + printf + `", "%s\\0", "${EVIL}", "$$(touch ` + pwned("env") + `)", "$EVIL"]
[watch]
backend = "sim"
[[profile]]
name = "only"
env = { EVIL = "` + strings.ReplaceAll(evil, `"`, `\"`) + `" }
`)
		code, out, stderr := e.run([]string{"run", "--policy", pol})
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		check(t, out, []string{evil, "$(touch " + pwned("env") + ")", "$EVIL"})
	})
}

// TestMetricsListenLoopbackInShippedFiles: every metrics listen address
// that a shipped policy, doc, unit or script shows binds to loopback
// (metrics are unauthenticated); "" (disabled) is fine too. The Kubernetes
// manifests and their doc are the exception the contract makes: Prometheus
// scrapes the pod's IP there (docs/kubernetes.md says how to fence the port
// off with a NetworkPolicy).
func TestMetricsListenLoopbackInShippedFiles(t *testing.T) {
	t.Parallel()
	listen := regexp.MustCompile(`\blisten\s*=\s*"([^"]*)"`)
	flag := regexp.MustCompile(`--metrics-addr[= ]+["']?([^\s"'` + "`" + `]*)`)
	addr := regexp.MustCompile(`^(.*):([0-9]+)$`)
	loopback := func(a string) bool {
		m := addr.FindStringSubmatch(a)
		if m == nil {
			return true // a placeholder such as HOST:PORT, not an address
		}
		switch m[1] {
		case "127.0.0.1", "localhost", "[::1]":
			return true
		}
		return false
	}
	root := ".."
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "__pycache__":
				return filepath.SkipDir
			}
			return nil
		}
		if rel, _ := filepath.Rel(root, path); strings.HasPrefix(rel, filepath.Join("deploy", "kubernetes")+string(filepath.Separator)) ||
			rel == filepath.Join("docs", "kubernetes.md") {
			return nil
		}
		switch filepath.Ext(path) {
		case ".toml", ".md", ".service", ".sh", ".conf", ".yml", ".yaml", ".py", ".txt":
		default:
			if !strings.Contains(d.Name(), "README") {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			var addrs []string
			for _, m := range listen.FindAllStringSubmatch(line, -1) {
				addrs = append(addrs, m[1])
			}
			for _, m := range flag.FindAllStringSubmatch(line, -1) {
				addrs = append(addrs, m[1])
			}
			for _, a := range addrs {
				checked++
				if a != "" && !loopback(a) {
					t.Errorf("%s:%d: metrics listen address %q is not loopback (127.0.0.1, localhost or [::1])", path, i+1, a)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 3 {
		t.Fatalf("found only %d metrics addresses: the patterns no longer match the files", checked)
	}
}
