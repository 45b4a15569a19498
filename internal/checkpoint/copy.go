package checkpoint

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuguard/gpuguard/internal/durable"
)

// The modes of what a rotation creates: private, whatever was copied.
const (
	generationFileMode = 0o600
	generationDirMode  = 0o700
)

// copyFile copies the regular file src into dst, which it closes, then
// gives dst mode 0600 and src's modification time (a generation shows
// when the checkpoint was saved, not when it was rotated) and fsyncs it.
// A generation is never readable by others, whatever the checkpoint's
// mode: it may be a copy of what a link in the checkpoint pointed to.
func (r rotator) copyFile(src string, dst *os.File, fi fs.FileInfo) error {
	defer dst.Close()
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	var w io.Writer = dst // a bare *os.File lets io.Copy use copy_file_range
	if r.wrap != nil {
		w = r.wrap(dst)
	}
	if _, err := io.Copy(w, in); err != nil {
		return err
	}
	if err := dst.Chmod(generationFileMode); err != nil {
		return err
	}
	if err := dst.Sync(); err != nil {
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Chtimes(dst.Name(), time.Time{}, fi.ModTime())
}

// copyDir copies the contents of directory src into the existing
// directory dst, recursively, then gives dst mode 0700 and src's
// modification time and fsyncs it. Symlinks are copied as links, never
// followed.
func (r rotator) copyDir(src, dst string, fi fs.FileInfo) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode().IsRegular():
			f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if err := r.copyFile(from, f, info); err != nil {
				return err
			}
		case info.IsDir():
			// Writable until filled; copyDir then sets the real mode.
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
			if err := r.copyDir(from, to, info); err != nil {
				return err
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(from)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: cannot copy a %v", from, info.Mode().Type())
		}
	}
	if err := durable.SyncDir(dst); err != nil {
		return err
	}
	if err := os.Chmod(dst, generationDirMode); err != nil {
		return err
	}
	return os.Chtimes(dst, time.Time{}, fi.ModTime())
}
