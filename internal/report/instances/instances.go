package instances

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/usage"
)

// Target is one instance to read.
type Target struct {
	Name, Dir string
	Named     bool // the name came from the user, not guessed from the dir
}

// Targets is the one state dir that stateDir or name gives (named when
// the name came from the user), else every instance dir under the state
// root for which has is true, with that root: the instances that `report`
// and `tasks` read when none is named. Errors in stateDir or name, or in
// finding the root, are usage errors (package usage).
func Targets(env paths.Env, stateDir, name string, has func(dir string) bool) ([]Target, string, error) {
	if stateDir != "" || name != "" {
		dir, err := env.StateDir(stateDir, name)
		if err != nil {
			return nil, "", usage.Wrap(err)
		}
		named := name != ""
		if name == "" {
			name = filepath.Base(dir)
		}
		return []Target{{Name: name, Dir: dir, Named: named}}, "", nil
	}
	root, err := env.StateRoot()
	if err != nil {
		return nil, "", usage.Wrap(err)
	}
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("listing instances: %v", err)
	}
	var targets []Target
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if e.IsDir() && has(dir) {
			targets = append(targets, Target{Name: e.Name(), Dir: dir})
		}
	}
	return targets, root, nil
}

// HasJournal says whether dir holds a journal, current or rotated.
func HasJournal(dir string) bool {
	matches, _ := filepath.Glob(filepath.Join(dir, paths.JournalFile+"*"))
	return len(matches) > 0
}
