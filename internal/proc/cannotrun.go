package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The two ways a command cannot be run at all. POSIX utilities that run
// another command (env, nohup, timeout, xargs) exit 127 for the first and
// 126 for the second; gpuguard does the same.
var (
	// ErrNotFound: no such command (not in PATH, or no file at the path).
	ErrNotFound = errors.New("command not found")
	// ErrCannotExecute: the command exists but cannot be executed (no
	// permission, a directory, not a binary for this machine and no #!
	// line, a #! interpreter that does not exist).
	ErrCannotExecute = errors.New("command cannot be executed")
)

// RunError says why a command cannot be run. It matches ErrNotFound or
// ErrCannotExecute with errors.Is, and the underlying cause (exec.ErrNotFound,
// fs.ErrNotExist, syscall.ENOEXEC, ...) where there is one.
type RunError struct {
	Command string // argv[0] as given
	Kind    error  // ErrNotFound or ErrCannotExecute
	Reason  string // one clause: "command not found in PATH=/usr/bin:/bin"
	Cause   error  // may be nil
}

func (e *RunError) Error() string { return fmt.Sprintf("cannot run %q: %s", e.Command, e.Reason) }

func (e *RunError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Cause}
}

func notFound(argv0, reason string, cause error) error {
	return &RunError{Command: argv0, Kind: ErrNotFound, Reason: reason, Cause: cause}
}

func cannotExecute(argv0, reason string, cause error) error {
	return &RunError{Command: argv0, Kind: ErrCannotExecute, Reason: reason, Cause: cause}
}

// checkExecutable returns nil when path is a regular file this process may
// execute (effective ids, as execve checks), else why not, in words that
// name path: an error matching fs.ErrNotExist when there is nothing there.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("%s is not executable (mode %s)", path, fi.Mode().Perm())
	}
	return nil
}

// absent reports whether err from a stat means there is no such file
// (rather than, say, a directory on the way that may not be searched).
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// execFailure classifies the error of a fork and exec of path (argv0 as
// given). Only errors of execve itself mean the command cannot run; the
// rest (no memory, no more processes) are gpuguard's own failure and come
// back as they are.
func execFailure(argv0, path string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case syscall.ENOENT, syscall.ENOTDIR:
		if _, serr := os.Stat(path); serr == nil {
			// The file is there: the kernel did not find its #!
			// interpreter (or the dynamic loader an ELF file names).
			what := "the dynamic loader it names"
			if interp := shebang(readHead(path)); interp != "" {
				what = "its #! interpreter " + interp
			}
			return cannotExecute(argv0, fmt.Sprintf("bad interpreter: %s exists, but %s was not found", path, what), errno)
		}
		return notFound(argv0, fmt.Sprintf("%s: no such file", path), errno)
	case syscall.ENOEXEC:
		return cannotExecute(argv0, fmt.Sprintf("exec format error: %s is not a binary for this machine and has no #! line (gpuguard never runs a command through a shell)", path), errno)
	case syscall.EACCES, syscall.EPERM:
		return cannotExecute(argv0, fmt.Sprintf("permission denied executing %s (not executable, or on a noexec mount, or its interpreter is not executable)", path), errno)
	case syscall.EISDIR, syscall.ELIBBAD, syscall.ETXTBSY, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.E2BIG, syscall.EINVAL:
		return cannotExecute(argv0, fmt.Sprintf("executing %s: %v", path, errno), errno)
	}
	return err
}

// readHead returns the first bytes of the file at path (nil on error).
func readHead(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := io.ReadFull(f, b)
	return b[:n]
}

// shebang returns the interpreter a script's #! line names, as the kernel
// reads it (the first word after #!), or "" when head has no #! line.
func shebang(head []byte) string {
	rest, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		return ""
	}
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	f := bytes.Fields(rest)
	if len(f) == 0 {
		return ""
	}
	return string(f[0])
}
