package paths

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Env is the part of the process environment that path resolution reads.
type Env struct {
	Getenv  func(string) string
	UID     int
	HomeDir string // "" = look it up from $HOME
	TempDir string // "" = os.TempDir()
}

// System returns the Env of this process.
func System() Env {
	return Env{Getenv: os.Getenv, UID: os.Getuid()}
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// StateRoot is the directory under which instances keep their state dirs
// when --state-dir is not given: $GPUGUARD_STATE_DIR, else
// $XDG_STATE_HOME/gpuguard, else ~/.local/state/gpuguard, or
// /var/lib/gpuguard as root.
func (e Env) StateRoot() (string, error) {
	if d := e.getenv("GPUGUARD_STATE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := e.getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Abs(filepath.Join(d, "gpuguard"))
	}
	if e.UID == 0 {
		return "/var/lib/gpuguard", nil
	}
	home := e.HomeDir
	if home == "" {
		home = e.getenv("HOME")
	}
	if home == "" {
		return "", fmt.Errorf("cannot place the state dir: set --state-dir, GPUGUARD_STATE_DIR or HOME")
	}
	return filepath.Join(home, ".local", "state", "gpuguard"), nil
}

// StateDir is the state dir of the named instance: flag (the instance's own
// dir) when given, else <StateRoot>/<name>. The result is absolute.
func (e Env) StateDir(flag, name string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	root, err := e.StateRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, name), nil
}

// RuntimeDir is where control sockets live: flag, else
// $GPUGUARD_RUNTIME_DIR, else $XDG_RUNTIME_DIR/gpuguard, else /run/gpuguard
// as root, else gpuguard-<uid> in the temp dir.
func (e Env) RuntimeDir(flag string) (string, error) {
	switch {
	case flag != "":
		return filepath.Abs(flag)
	case e.getenv("GPUGUARD_RUNTIME_DIR") != "":
		return filepath.Abs(e.getenv("GPUGUARD_RUNTIME_DIR"))
	case e.getenv("XDG_RUNTIME_DIR") != "":
		return filepath.Abs(filepath.Join(e.getenv("XDG_RUNTIME_DIR"), "gpuguard"))
	case e.UID == 0:
		return "/run/gpuguard", nil
	}
	tmp := e.TempDir
	if tmp == "" {
		tmp = e.getenv("TMPDIR")
	}
	if tmp == "" {
		tmp = os.TempDir()
	}
	return filepath.Abs(filepath.Join(tmp, "gpuguard-"+strconv.Itoa(e.UID)))
}

// RuntimeDirs lists every runtime dir `status` should scan: this user's,
// and as root also the system one.
func (e Env) RuntimeDirs(flag string) ([]string, error) {
	d, err := e.RuntimeDir(flag)
	if err != nil {
		return nil, err
	}
	dirs := []string{d}
	if flag == "" && e.UID == 0 && d != "/run/gpuguard" {
		dirs = append(dirs, "/run/gpuguard")
	}
	return dirs, nil
}

// Socket is the control socket of the named instance in runtime dir dir.
func Socket(dir, name string) string {
	return filepath.Join(dir, name+".sock")
}

// Files inside a state dir.
const (
	CheckpointFile = "checkpoint"
	StateFile      = "state.json"
	JournalFile    = "events.jsonl"
	SimDir         = "sim"
)

// ValidName reports whether name can name an instance: it becomes a file
// name in the state and runtime dirs.
func ValidName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 100 {
		return fmt.Errorf("invalid instance name %q", name)
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || r == '.' || r == '@' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("invalid instance name %q: use letters, digits, '-', '_', '.', '@'", name)
		}
	}
	return nil
}
