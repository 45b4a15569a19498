package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestReadPipe: `run --policy /dev/stdin` and `policy check /dev/stdin`
// read a pipe, since the user named it (ReadFile); a reload, read on the
// running instance's behalf, refuses it (ReadRegularFile), for a pipe
// nobody writes would hold it for ever.
func TestReadPipe(t *testing.T) {
	const text = "command = [\"serve\"]\n"
	pipe := func() string {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		if _, err := w.WriteString(text); err != nil {
			t.Fatal(err)
		}
		w.Close()
		return fmt.Sprintf("/dev/fd/%d", r.Fd())
	}
	if data, err := ReadFile(pipe()); err != nil || string(data) != text {
		t.Errorf("ReadFile of a pipe: %q, %v; want %q", data, err, text)
	}
	if _, err := ReadRegularFile(pipe()); err == nil || !strings.Contains(err.Error(), "cannot read policy: not a regular file (a FIFO)") {
		t.Errorf("ReadRegularFile of a pipe: %v, want not a regular file (a FIFO)", err)
	}
}
