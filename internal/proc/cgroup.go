package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroups gives every child a cgroup v2 of its own, so that a process that
// left the child's process group (setsid, a double-forked daemon) is still
// found and killed: the kernel moves every descendant into its parent's
// cgroup, and no process can leave one without write access to an
// ancestor's cgroup.procs.
//
// An instance's cgroups live in one directory, <parent>/gpuguard-<key>,
// one leaf per child, named <gpuguard's pid>.<n>. A leaf is killed
// (cgroup.kill) and removed when its child's main process exits. The
// directory is derived from the instance's identity, so a gpuguard that
// was SIGKILLed and left processes behind is cleaned up by the next one
// with the same key. What other instances left empty (a SIGKILLed
// instance that never ran again) is removed too; their processes are not
// touched.
//
// Its methods are safe for concurrent use.
type Cgroups struct {
	dir   string // the instance's directory
	owner int    // gpuguard's pid, the first part of leaf names
	logf  func(format string, args ...any)

	mu       sync.Mutex
	seq      int
	left     bool  // a leaf could not be removed: the next create sweeps
	disabled error // why children are no longer put in cgroups, or nil
}

// CgroupsOff, as the parent given to OpenCgroups, disables cgroups.
const CgroupsOff = "off"

// errNoCgroups reports that cgroup v2 cannot be used here; the caller falls
// back on process groups.
var errNoCgroups = errors.New("cgroup v2 unavailable")

// cgroupWait bounds how long a killed cgroup may take to empty before its
// removal is left to a later sweep.
const cgroupWait = time.Second

// OpenCgroups prepares the cgroups of one instance. key names the instance
// (it must be a valid file name and unique among the instances that may
// share parent, which holding the instance lock guarantees when key is
// derived from the lock). parent is the cgroup v2 directory to create them
// under: "" means gpuguard's own cgroup; a path not under the cgroup2
// mount is taken relative to it; CgroupsOff disables cgroups.
//
// Whatever an earlier holder of the same key left behind is killed and
// removed first. The error says why cgroups cannot be used (no cgroup2
// mount, no cgroup.kill, no write access); the caller then relies on
// process groups alone. logf receives problems met later; it may be nil.
func OpenCgroups(parent, key string, logf func(format string, args ...any)) (*Cgroups, error) {
	if parent == CgroupsOff {
		return nil, fmt.Errorf("%w: disabled", errNoCgroups)
	}
	if key == "" || strings.ContainsAny(key, "/\x00") || key == "." || key == ".." {
		return nil, fmt.Errorf("invalid cgroup key %q", key)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	base, err := cgroupParent("/proc/self/mountinfo", "/proc/self/cgroup", parent)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoCgroups, err)
	}
	dir := filepath.Join(base, "gpuguard-"+key)
	cg := &Cgroups{dir: dir, owner: os.Getpid(), logf: logf}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%w: creating %s: %w", errNoCgroups, dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("%w: %s has no cgroup.kill (Linux 5.14 or later is needed)", errNoCgroups, dir)
	}
	if n, _ := cg.sweep(""); n > 0 {
		logf("killed %d process(es) left in cgroups by an earlier instance", n)
	}
	removeAbandoned(base, dir)
	return cg, nil
}

// removeAbandoned removes the empty cgroups that other instances under
// base left: leaves whose gpuguard is gone, then instance directories
// without leaves. rmdir fails on a cgroup that holds a process, so no
// process is affected; an instance whose empty directory goes makes it
// again at its next child.
func removeAbandoned(base, own string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "gpuguard-*"))
	for _, d := range dirs {
		if d == own {
			continue
		}
		leaves, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, l := range leaves {
			owner, _, ok := strings.Cut(l.Name(), ".")
			pid, err := strconv.Atoi(owner)
			if !l.IsDir() || !ok || err != nil || pid <= 0 {
				continue
			}
			if _, err := os.Stat("/proc/" + owner); errors.Is(err, fs.ErrNotExist) {
				os.Remove(filepath.Join(d, l.Name()))
			}
		}
		os.Remove(d)
	}
}

// Dir is the instance's cgroup directory.
func (cg *Cgroups) Dir() string { return cg.dir }

// Err says why children are no longer started in cgroups, or is nil.
func (cg *Cgroups) Err() error {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	return cg.disabled
}

// Close kills and removes every leaf still there, then the instance's
// directory. Call it once no child runs.
func (cg *Cgroups) Close() error {
	cg.sweep("")
	if err := os.Remove(cg.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing cgroup %s: %w", cg.dir, err)
	}
	return nil
}

// create makes a leaf for the next child and opens it for CLONE_INTO_CGROUP.
// It returns nil once cgroups are disabled. Leaves that an earlier child
// left populated (a process stuck in the kernel past cgroupWait) are
// retried here; when none was left, as after every child whose leaf went
// with it, the instance's directory is not listed: a crash loop starts a
// child per restart, and each listing is a few system calls more before
// the fork.
func (cg *Cgroups) create() *cgroup {
	cg.mu.Lock()
	if cg.disabled != nil {
		cg.mu.Unlock()
		return nil
	}
	cg.seq++
	name := strconv.Itoa(cg.owner) + "." + strconv.Itoa(cg.seq)
	left := cg.left
	cg.left = false
	cg.mu.Unlock()
	if left {
		if _, removed := cg.sweep(name); !removed {
			cg.leftBehind() // still there: the next child's start tries again
		}
	}
	path := filepath.Join(cg.dir, name)
	// Another instance may remove our directory while it has no leaf
	// (removeAbandoned): make it again.
	err := os.Mkdir(path, 0o755)
	for range 3 {
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err = os.Mkdir(cg.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			break
		}
		err = os.Mkdir(path, 0o755)
	}
	if err != nil {
		cg.disable(fmt.Errorf("creating %s: %w", path, err))
		return nil
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		cg.disable(fmt.Errorf("opening %s: %w", path, err))
		return nil
	}
	return &cgroup{path: path, dirfd: fd, open: true}
}

// retire removes a child's leaf once its main process is gone (waiting at
// most d for the leaf to empty). A leaf it cannot remove is left for the
// next child's start to retry.
func (cg *Cgroups) retire(leaf *cgroup, d time.Duration) {
	if err := leaf.remove(d); err != nil {
		cg.leftBehind()
		cg.logf("%v (left for a later sweep)", err)
	}
}

// leftBehind notes that a leaf is still there: the next create sweeps.
func (cg *Cgroups) leftBehind() {
	cg.mu.Lock()
	cg.left = true
	cg.mu.Unlock()
}

// disable stops putting children in cgroups, once, saying why.
func (cg *Cgroups) disable(err error) {
	cg.mu.Lock()
	first := cg.disabled == nil
	if first {
		cg.disabled = err
	}
	cg.mu.Unlock()
	if first {
		cg.logf("cgroup v2 cannot be used (%v); a child that leaves its process group will not be cleaned up", err)
	}
}

// sweep kills and removes every leaf but keep and returns how many
// processes it found in them, and whether every leaf went.
func (cg *Cgroups) sweep(keep string) (procs int, removed bool) {
	entries, err := os.ReadDir(cg.dir)
	if err != nil {
		return 0, true
	}
	n, removed := 0, true
	for _, e := range entries {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		leaf := &cgroup{path: filepath.Join(cg.dir, e.Name())}
		n += len(leaf.procs())
		leaf.kill()
		if err := leaf.remove(cgroupWait); err != nil {
			removed = false
			cg.logf("%v", err)
		}
	}
	return n, removed
}

// cgroup is one child's leaf cgroup. Its files are read and written with
// plain system calls (open, read or write, close): through package os each
// costs three to four more (the poller's tries: fcntl, epoll_ctl, fstat),
// and a restart kills, reads and opens one leaf or another between the
// child's exit and the next fork.
type cgroup struct {
	path  string
	dirfd int  // the leaf's directory, for CLONE_INTO_CGROUP
	open  bool // dirfd is open: only while the child is being started
}

// closeDir closes the descriptor used to start the child.
func (c *cgroup) closeDir() {
	if c.open {
		unix.Close(c.dirfd)
		c.open = false
	}
}

// kill sends SIGKILL to every process in the cgroup (and its
// descendant cgroups), atomically with respect to forks.
func (c *cgroup) kill() error {
	fd, err := unix.Open(filepath.Join(c.path, "cgroup.kill"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		_, err = unix.Write(fd, []byte("1"))
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("killing cgroup %s: %w", c.path, err)
	}
	return nil
}

// procs lists the pids in the cgroup itself.
func (c *cgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(c.path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// remove waits (at most d) for the killed cgroup to empty, then removes it.
func (c *cgroup) remove(d time.Duration) error {
	c.closeDir()
	if err := waitEmpty(c.path, d); err != nil {
		return fmt.Errorf("removing cgroup %s: %w", c.path, err)
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing cgroup %s: %w", c.path, err)
	}
	return nil
}

// waitEmpty waits until cgroup.events says "populated 0", at most d. The
// kernel signals changes of that file as modifications (inotify), so this
// never polls on a timer. Most of the time the cgroup is already empty and
// no inotify instance is made: closing one costs milliseconds (an SRCU
// grace period), which a crash loop would pay on every restart.
func waitEmpty(path string, d time.Duration) error {
	events := filepath.Join(path, "cgroup.events")
	if populated, err := isPopulated(events); err != nil || !populated {
		return nil // a vanished cgroup is empty
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, events, unix.IN_MODIFY); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(d)
	buf := make([]byte, 4096)
	for {
		populated, err := isPopulated(events)
		if err != nil || !populated {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("still populated after SIGKILL")
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, int(left/time.Millisecond)+1); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		for { // drain the queued events
			if _, err := unix.Read(fd, buf); err != nil {
				break
			}
		}
	}
}

// isPopulated reads the "populated" key of a cgroup.events file.
func isPopulated(events string) (bool, error) {
	b, err := readSmall(events, make([]byte, 0, 64))
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return false, fmt.Errorf("%s: no populated key", events)
}

// cgroupParent resolves the directory to create cgroups under: parent as
// given, or the process's own cgroup v2 when parent is "".
func cgroupParent(mountinfo, selfCgroup, parent string) (string, error) {
	mnt, root, err := cgroup2Mount(mountinfo)
	if err != nil {
		return "", err
	}
	var dir string
	switch {
	case parent == "":
		own, err := ownCgroup(selfCgroup)
		if err != nil {
			return "", err
		}
		// Without a cgroup namespace the mount may show a subtree only
		// (a container's): the own path is then relative to its root.
		rel, ok := strings.CutPrefix(own, root)
		if root == "/" {
			rel, ok = own, true
		}
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			return "", fmt.Errorf("own cgroup %s is outside the mounted cgroup2 tree (%s)", own, root)
		}
		dir = filepath.Join(mnt, rel)
	case strings.HasPrefix(filepath.Clean(parent)+"/", mnt+"/"):
		dir = filepath.Clean(parent)
	default:
		dir = filepath.Join(mnt, parent)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return "", fmt.Errorf("cgroup %s is not writable: %w", dir, err)
	}
	return dir, nil
}

// cgroup2Mount finds the first cgroup2 mount in a mountinfo file and the
// path of the cgroup it shows as its root.
func cgroup2Mount(mountinfo string) (mnt, root string, err error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint options [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && i >= 5 {
				if fields[i+1] == "cgroup2" {
					return unescapeMount(fields[4]), unescapeMount(fields[3]), nil
				}
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", errors.New("no cgroup2 file system is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup reads the unified (v2) entry, "0::<path>", of /proc/self/cgroup.
func ownCgroup(selfCgroup string) (string, error) {
	b, err := os.ReadFile(selfCgroup)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 entry in " + selfCgroup)
}
