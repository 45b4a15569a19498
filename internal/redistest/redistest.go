// Package redistest starts a real redis-server for tests: on a free
// 127.0.0.1 port, in a temp dir, with appendonly yes and appendfsync
// always (the settings under which the Redis store loses nothing), so no
// system service is needed. Tests skip without redis-server unless CI is
// set, where they fail: CI installs it (.ci/run).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Server is one redis-server process and its data dir.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	Port int
	cmd  *exec.Cmd
}

// Start starts a redis-server for t; it is killed at t's end.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is required in CI (apt-get install redis-server): %v", err)
		}
		t.Skip("redis-server not installed (apt-get install redis-server); set CI to make this a failure")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), Port: freePort(t)}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// Restart starts the server (again, on the same port and data dir, so it
// reloads its append-only file) and returns once it accepts connections.
func (s *Server) Restart() {
	s.t.Helper()
	cmd := exec.Command(s.bin, "--port", fmt.Sprint(s.Port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no", "--logfile", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.cmd = cmd
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var log []string
		for sc.Scan() {
			log = append(log, sc.Text())
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				ready <- nil
				for sc.Scan() { // keep draining so the server never blocks on its log
				}
				return
			}
		}
		ready <- fmt.Errorf("redis-server exited before it was ready:\n%s", strings.Join(log, "\n"))
	}()
	select {
	case err := <-ready:
		if err != nil {
			s.t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		s.t.Fatal("redis-server not ready within 30s")
	}
}

// Kill kills the server with SIGKILL (a crash: only what it fsynced to its
// append-only file survives) and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
