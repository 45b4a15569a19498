package regfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpen: a FIFO nobody opens is refused at once, to read and to write
// (a plain open blocks for ever on both), naming what it is; so are a
// directory, a device and a socket;
// a regular file opens, and a missing one can be created.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		path string
		flag int
		says string
	}{
		{fifo, os.O_RDONLY, "a FIFO"},
		{fifo, os.O_WRONLY | os.O_APPEND | os.O_CREATE, "not a regular file (a FIFO)"},
		{dir, os.O_RDONLY, "a directory"},
		{"/dev/null", os.O_WRONLY, "a device"},
		{sock, os.O_RDONLY, "not a regular file (a socket)"},
	} {
		f, err := Open(c.path, c.flag, 0o600)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Open(%s, %#x): %v, want %q", c.path, c.flag, err, c.says)
		}
		if f != nil {
			f.Close()
		}
	}
	f, err := Open(filepath.Join(dir, "new"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("x\n"); err != nil {
		t.Error(err)
	}
	f.Close()
	if f, err = Open(filepath.Join(dir, "new"), os.O_RDONLY, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestReadSmall: a symlink (even to a regular file), a FIFO and /dev/zero
// are refused at once; a sparse file over the limit is refused without
// being read; a file at the limit is read whole.
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ok, link); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	if err := os.WriteFile(sparse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 8<<30); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		is   error
	}{{link, ErrNotRegular}, {zero, ErrNotRegular}, {fifo, ErrNotRegular}, {sparse, ErrTooLarge}, {"/dev/zero", ErrNotRegular}} {
		if b, err := ReadSmall(c.path, 100); !errors.Is(err, c.is) {
			t.Errorf("ReadSmall(%s) = %d bytes, %v; want %v", c.path, len(b), err, c.is)
		}
	}
	if b, err := ReadSmall(ok, 100); err != nil || len(b) != 100 {
		t.Errorf("ReadSmall(ok) = %d bytes, %v; want 100", len(b), err)
	}
	if _, err := ReadSmall(ok, 99); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadSmall(ok, 99) = %v; want ErrTooLarge", err)
	}
}
