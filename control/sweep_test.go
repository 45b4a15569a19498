package control

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestSweepStale: a socket whose lock is free is removed with its lock
// file; one whose instance holds the lock (a live Server) is kept.
func TestSweepStale(t *testing.T) {
	dir := t.TempDir()
	s, err := Listen(dir, "live")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	live := Instance{Name: "live", Dir: dir, Socket: filepath.Join(dir, "live.sock")}
	if swept, err := SweepStale(live); swept || err != nil {
		t.Fatalf("a live instance was swept: %v %v", swept, err)
	}
	if _, err := os.Lstat(live.Socket); err != nil {
		t.Fatalf("the live socket is gone: %v", err)
	}

	dead := Instance{Name: "dead", Dir: dir, Socket: filepath.Join(dir, "dead.sock")}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead.Socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := os.WriteFile(filepath.Join(dir, "dead.lock"), []byte("12345\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if swept, err := SweepStale(dead); !swept || err != nil {
		t.Fatalf("a dead instance's socket was not swept: %v %v", swept, err)
	}
	for _, p := range []string{dead.Socket, filepath.Join(dir, "dead.lock")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	// A new instance of the dead one's name starts as usual afterwards.
	s2, err := Listen(dir, "dead")
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}
