package simdir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/usage"
)

// Query is what finds a sim dir for `sim set`, `sim xid` and
// `status --backend sim`.
type Query struct {
	Flag       string // --dir / --sim-dir
	Name       string // --name: that instance's sim dir
	RuntimeDir string
	// AskRunning asks the running instances for their sim dirs; status
	// asks none, since it looks only when none answered.
	AskRunning bool
	Getenv     func(string) string // the command's environment
	Warn       io.Writer           // gets what asking the instances could not learn
}

// queryTimeout bounds asking the running instances for their sim dirs.
const queryTimeout = time.Second

// Find resolves the sim dir: the flag; $GPUGUARD_SIM_DIR; the named
// instance's (its status says, else <state-root>/NAME/sim); the one that
// the running instances on the sim backend share; else the only one under
// the default state root. An instance that ever ran (and left its sim
// dir) no longer makes `sim set` ambiguous while another one runs.
func Find(q Query) (string, error) {
	flag := q.Flag
	if flag == "" {
		flag = q.Getenv("GPUGUARD_SIM_DIR")
	}
	if flag != "" {
		return filepath.Abs(flag)
	}
	env := paths.System()
	env.Getenv = q.Getenv
	var running map[string]string // instance -> sim dir
	if q.AskRunning || q.Name != "" {
		var err error
		if running, err = runningSimDirs(env, q.RuntimeDir, q.Name); err != nil {
			// What the running instances say is lost; what they left
			// under the state root may still tell.
			fmt.Fprintf(q.Warn, "gpuguard: warning: asking the running instances for their sim dirs: %v\n", err)
		}
	}
	root, rootErr := env.StateRoot()
	if q.Name != "" {
		if d := running[q.Name]; d != "" {
			return d, nil
		}
		if rootErr == nil {
			if d := filepath.Join(root, q.Name, paths.SimDir); isDir(d) {
				return d, nil
			}
		}
		return "", usage.Errorf("no sim dir for instance %q: it is not running on the sim backend, and has none under the state root; pass --dir", q.Name)
	}
	var dirs, names []string
	for name, d := range running {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
		names = append(names, name)
	}
	switch len(dirs) {
	case 1:
		return dirs[0], nil
	case 0:
	default:
		slices.Sort(names)
		return "", usage.Errorf("several running instances use the sim backend with their own sim dirs (%s); pass --name NAME or --dir DIR", strings.Join(names, ", "))
	}
	if rootErr != nil {
		return "", usage.Errorf("no sim dir: pass --dir (%w)", rootErr)
	}
	found, err := stateRootSimDirs(root)
	if err != nil {
		return "", err
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", usage.Errorf("no sim dir: no instance runs on the sim backend and none under %s has one; pass --dir or set GPUGUARD_SIM_DIR", root)
	}
	return "", usage.Errorf("no instance runs on the sim backend, and several under %s have a sim dir (%s); pass --name NAME or --dir DIR", root, strings.Join(found, ", "))
}

// runningSimDirs asks the running instances (only name, when given) for
// their sim dirs; those not on the sim backend, or not answering, are left
// out. A runtime dir that cannot be listed is the error, beside what the
// others said.
func runningSimDirs(env paths.Env, runtimeDir, name string) (map[string]string, error) {
	dirs, err := env.RuntimeDirs(runtimeDir)
	if err != nil {
		return nil, err
	}
	ins, err := control.Discover(dirs)
	if name != "" {
		ins = slices.DeleteFunc(ins, func(in control.Instance) bool { return in.Name != name })
	}
	out := map[string]string{}
	for _, st := range control.QueryAll(context.Background(), ins, queryTimeout) {
		if st.SimDir != "" {
			if _, seen := out[st.Name]; !seen { // the first runtime dir wins, as for status
				out[st.Name] = st.SimDir
			}
		}
	}
	return out, err
}

// stateRootSimDirs lists <root>/*/sim.
func stateRootSimDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var found []string
	for _, e := range ents {
		if d := filepath.Join(root, e.Name(), paths.SimDir); isDir(d) {
			found = append(found, d)
		}
	}
	return found, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
