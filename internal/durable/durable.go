package durable

import (
	"errors"
	"os"
	"syscall"
)

// SyncDir makes the entries of dir (a rename, a new file) durable.
// Filesystems that cannot sync a directory say EINVAL; there is nothing
// more to do on them.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
