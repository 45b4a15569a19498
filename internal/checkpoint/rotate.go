package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuguard/gpuguard/internal/durable"
)

// Rotate copies the checkpoint at path (a file or a directory) to
// <path>.1 after shifting <path>.1 .. <path>.(keep-1) up by one, dropping
// <path>.keep. keep = 0 keeps no generations and does nothing; generations
// beyond keep (left by a larger keep earlier) are left alone. A missing
// checkpoint is not an error: there is nothing to keep yet. A checkpoint
// file that has not changed since it was last copied (same size and
// modification time as <path>.1, which the copy preserves: rsync's quick
// check) is not copied again, so a crash loop neither pays for a copy per
// restart nor pushes older, different generations out with duplicates.
func Rotate(path string, keep int) error {
	return rotator{}.rotate(path, keep)
}

// rotator carries what tests replace.
type rotator struct {
	// wrap, when set, wraps the writer of every file copied, so tests can
	// make a copy fail midway as a full disk would.
	wrap func(io.Writer) io.Writer
}

func (r rotator) rotate(path string, keep int) error {
	if keep < 0 {
		return fmt.Errorf("checkpoint generations to keep: %d is negative", keep)
	}
	if keep == 0 {
		return nil
	}
	path = filepath.Clean(path)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if unchangedSinceLastCopy(path, fi) {
		return nil
	}
	dir, prefix := filepath.Dir(path), "."+filepath.Base(path)+".rotate-"
	removeLeftovers(dir, prefix)

	tmp, err := r.copyAside(path, fi, dir, prefix)
	if err != nil {
		return fmt.Errorf("copying checkpoint %s: %w", path, err)
	}
	if err := shift(path, keep, tmp, dir, prefix); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("rotating checkpoint generations of %s: %w", path, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("rotating checkpoint generations of %s: %w", path, err)
	}
	return nil
}

// generation is the name of generation i of the checkpoint at path.
func generation(path string, i int) string {
	return path + "." + strconv.Itoa(i)
}

// copyAside copies the checkpoint to a new hidden name in dir and returns
// that name. On failure nothing of the copy is left.
func (r rotator) copyAside(path string, fi fs.FileInfo, dir, prefix string) (string, error) {
	switch {
	case fi.Mode().IsRegular():
		f, err := os.CreateTemp(dir, prefix+"*")
		if err != nil {
			return "", err
		}
		if err := r.copyFile(path, f, fi); err != nil {
			os.Remove(f.Name())
			return "", err
		}
		return f.Name(), nil
	case fi.IsDir():
		tmp, err := os.MkdirTemp(dir, prefix+"*")
		if err != nil {
			return "", err
		}
		if err := r.copyDir(path, tmp, fi); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
		return tmp, nil
	}
	return "", fmt.Errorf("%s is neither a regular file nor a directory (%v)", path, fi.Mode().Type())
}

// shift moves the generations up by one and puts tmp in as generation 1.
// The dropped generation is moved aside first: rename cannot replace a
// non-empty directory, nor a file by a directory. Every step is a rename,
// so a failure loses no generation but the dropped one.
func shift(path string, keep int, tmp, dir, prefix string) error {
	oldest := generation(path, keep)
	if _, err := os.Lstat(oldest); err == nil {
		trash, err := os.MkdirTemp(dir, prefix+"*")
		if err != nil {
			return err
		}
		// Removed whether or not the rest succeeds; a failure to remove
		// is retried by the next rotation's cleanup.
		defer os.RemoveAll(trash)
		if err := os.Rename(oldest, filepath.Join(trash, "dropped")); err != nil {
			return err
		}
	}
	for i := keep - 1; i >= 1; i-- {
		err := os.Rename(generation(path, i), generation(path, i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return os.Rename(tmp, generation(path, 1))
}

// removeLeftovers removes what an interrupted rotation left in dir.
// Failures are harmless and ignored.
func removeLeftovers(dir, prefix string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// unchangedSinceLastCopy reports whether the newest generation of a
// checkpoint file already holds it.
func unchangedSinceLastCopy(path string, fi fs.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	g, err := os.Lstat(path + ".1")
	return err == nil && g.Mode().IsRegular() && g.Size() == fi.Size() && g.ModTime().Equal(fi.ModTime())
}
