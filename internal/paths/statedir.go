package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// PrepareStateDir makes dir usable as an instance's state dir, for the
// effective user uid: a missing dir is created 0700 (whatever the umask);
// an existing one must be a directory owned by uid and not writable by
// group or others. Anyone else who can write in a state dir can plant a
// symlink where gpuguard writes (the journal, a checkpoint generation) and
// have it write, as whoever gpuguard runs as, where they could not; root
// running in a user's dir is the case that hurts. Such a dir is refused,
// never chmodded: it is not gpuguard's to change.
func PrepareStateDir(dir string, uid int) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating the state dir: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("creating the state dir: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return checkStateDir(dir, fi, uid)
}

// checkStateDir is PrepareStateDir's verdict on an existing dir.
func checkStateDir(dir string, fi fs.FileInfo, uid int) error {
	if !fi.IsDir() {
		return fmt.Errorf("state dir %s is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != uid {
		return fmt.Errorf("state dir %s belongs to %s, not to this user (uid %d); use a dir of your own (--state-dir)", dir, owner(st.Uid), uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		by := ""
		if ok {
			by = ", owner " + owner(st.Uid)
		}
		return fmt.Errorf("state dir %s is writable by group or others (mode %04o%s); use a private dir (chmod 0700) or --state-dir", dir, fi.Mode().Perm(), by)
	}
	return nil
}

// owner names a uid with its user name when it has one.
func owner(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %s (%s)", id, u.Username)
	}
	return "uid " + id
}
