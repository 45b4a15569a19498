package durable

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Replace puts data at path with mode perm through a temporary dot file
// in the same directory and a rename, so a reader sees the old file or the
// new one, never a part, and a symlink at path is replaced rather than
// written through. With sync the file and the directory entry are fsynced
// before it returns (a page a user keeps); without, only the rename's
// atomicity holds (files rewritten often, whose loss in a host crash costs
// nothing). On failure nothing of the temporary file is left.
//
// The state file has its own (statefile.replace): it is written before
// every start, on the restart path, so it speaks to the kernel in four
// system calls and frees the replaced inode off the caller's goroutine;
// what uses Replace is written rarely and needs neither.
func Replace(path string, data []byte, perm fs.FileMode, sync bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // CreateTemp makes 0600
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", path, err)
	}
	if sync {
		return SyncDir(dir)
	}
	return nil
}
