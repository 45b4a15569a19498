package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Check reports whether Start could run spec's command, without starting
// anything: a *RunError when the command is not found or cannot be
// executed, another error for a bad Spec or a missing Dir. Start makes the
// same checks; the exec itself can still fail with a *RunError for what
// only the kernel sees (a #! interpreter that does not exist, a binary for
// another machine).
func Check(spec Spec) error {
	_, _, err := check(spec)
	return err
}

// check is Check, returning the path to exec and spec with its defaults.
func check(spec Spec) (string, Spec, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return "", spec, err
	}
	if spec.Dir != "" {
		// Checked here because the fork would report a missing Dir as
		// the command not existing.
		if _, err := os.Stat(spec.Dir); err != nil {
			return "", spec, fmt.Errorf("starting %q: working directory: %w", spec.Argv[0], err)
		}
	}
	path, err := resolve(spec.Argv[0], spec.Env, spec.Dir)
	return path, spec, err
}

// resolve returns the path to exec for argv0. Unlike exec.Command, which
// searches gpuguard's own PATH, it searches the PATH of env, the
// environment the child will run with: a profile or policy that sets PATH
// must decide which binary runs. env == nil means gpuguard's environment.
// A name with a slash is used as is (relative to dir, the child's working
// directory, "" for gpuguard's).
//
// As execvp does, the search skips entries that are not executable files
// and reports the command as not found only when no entry had one;
// otherwise it cannot be executed (the first such entry names why).
func resolve(argv0 string, env []string, dir string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		switch err := checkExecutable(p); {
		case err == nil:
			return argv0, nil
		case absent(err):
			return "", notFound(argv0, err.Error(), err)
		default:
			return "", cannotExecute(argv0, err.Error(), err)
		}
	}
	path, ok := "", false
	if env == nil {
		path, ok = os.LookupEnv("PATH")
	} else {
		path, ok = lookupEnv(env, "PATH")
	}
	if !ok {
		return "", notFound(argv0, "command not found: PATH is not set in the child's environment", exec.ErrNotFound)
	}
	var denied error // the first entry that exists but cannot be executed
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "." // POSIX: an empty PATH entry is the current directory
		}
		p := filepath.Join(d, argv0)
		if err := checkExecutable(p); err != nil {
			if !absent(err) && denied == nil {
				denied = cannotExecute(argv0, fmt.Sprintf("%v (found through PATH=%s)", err, path), err)
			}
			continue
		}
		if !filepath.IsAbs(p) {
			// Like exec.LookPath since Go 1.19: a binary found through a
			// relative PATH entry is refused rather than run by surprise.
			return "", cannotExecute(argv0, fmt.Sprintf("found as %s through a relative PATH entry, which gpuguard does not run (give an absolute path)", p), exec.ErrDot)
		}
		return p, nil
	}
	if denied != nil {
		return "", denied
	}
	return "", notFound(argv0, "command not found in PATH="+path, exec.ErrNotFound)
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
