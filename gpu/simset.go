package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuguard/gpuguard/internal/durable"
)

// SimSet sets the simulated usage of name on device gpu under dir: name is
// a PID (usage that ends with the process) or any other tenant name. The
// file is replaced atomically (a "."-prefixed temp file renamed into
// place), so a concurrent Sample sees the old or the new value, never a
// partial one. size 0 removes the file; removing a missing one is not an
// error.
func SimSet(dir string, gpu int, name string, size uint64) error {
	if err := ValidSimName(name); err != nil {
		return err
	}
	if gpu < 0 {
		return fmt.Errorf("sim: GPU %d: want a non-negative index", gpu)
	}
	devDir := simDeviceDir(dir, gpu)
	path := filepath.Join(devDir, name)
	if size == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sim: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if err := durable.Replace(path, []byte(strconv.FormatUint(size, 10)+"\n"), 0o644, false); err != nil {
		return fmt.Errorf("sim: setting %w", err)
	}
	return nil
}

// ValidSimName reports whether name can name a usage file: not empty, no
// '/', and not starting with '.' (such files are ignored).
func ValidSimName(name string) error {
	switch {
	case name == "":
		return errors.New("sim: empty name")
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("sim: name %q: names starting with '.' are ignored", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("sim: name %q: must not contain '/'", name)
	}
	return nil
}
