package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// resolve returns the path to exec for argv0. Unlike exec.Command, which
// searches gpuguard's own PATH, it searches the PATH of env, the
// environment the child will run with: a profile or policy that sets PATH
// must decide which binary runs. env == nil means gpuguard's environment.
// A name with a slash is used as is (relative to the child's Dir).
func resolve(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	path, ok := "", false
	if env == nil {
		path, ok = os.LookupEnv("PATH")
	} else {
		path, ok = lookupEnv(env, "PATH")
	}
	if !ok {
		return "", fmt.Errorf("command %q: %w: PATH is not set in the child's environment", argv0, exec.ErrNotFound)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "." // POSIX: an empty PATH entry is the current directory
		}
		p := filepath.Join(dir, argv0)
		if !isExecutable(p) {
			continue
		}
		if !filepath.IsAbs(p) {
			// Like exec.LookPath since Go 1.19: a binary found through a
			// relative PATH entry is refused rather than run by surprise.
			return "", fmt.Errorf("command %q: found as %q via a relative PATH entry: %w", argv0, p, exec.ErrDot)
		}
		return p, nil
	}
	return "", fmt.Errorf("command %q: %w in PATH %q", argv0, exec.ErrNotFound, path)
}

// lookupEnv returns the value of key in env; the last entry wins, as in
// the environment os/exec passes on.
func lookupEnv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// isExecutable reports whether p is a regular file this process may
// execute (effective ids, as execve checks).
func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS) == nil
}
