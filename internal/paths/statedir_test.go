package paths

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareStateDir: a missing dir is created 0700 whatever the umask;
// an existing private dir of ours is used as it is; one writable by group
// or others, one of another uid (as root: a dir chowned to nobody), and a
// file are refused, each error naming the dir (and the owner).
func TestPrepareStateDir(t *testing.T) {
	root := t.TempDir()
	uid := os.Geteuid()
	fresh := filepath.Join(root, "a", "fresh")
	if err := PrepareStateDir(fresh, uid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created %v, %v; want 0700", fi.Mode(), err)
	}
	if err := PrepareStateDir(fresh, uid); err != nil {
		t.Fatalf("our own dir, again: %v", err)
	}
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o600)
	cases := map[string]string{
		mk("group", 0o770):   "writable by group or others (mode 0770, owner uid ",
		mk("sticky", 0o1777): "writable by group or others (mode 0777, owner uid ",
		file:                 "is not a directory",
	}
	if uid == 0 {
		other := mk("other", 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[other] = "belongs to uid 65534"
	} else {
		cases[fresh] = "" // no other uid to chown to; checked in e2e as root
		if err := checkStateDir(fresh, mustStat(t, fresh), uid+1); err == nil || !strings.Contains(err.Error(), "belongs to uid") {
			t.Errorf("another uid's dir: %v", err)
		}
		delete(cases, fresh)
	}
	for dir, want := range cases {
		err := PrepareStateDir(dir, uid)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming it and %q", dir, err, want)
		}
	}
}

func mustStat(t *testing.T, p string) os.FileInfo {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
