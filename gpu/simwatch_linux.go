package gpu

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// simWatchMask is every change to a device dir that can change what its
// listing reads: an entry made, removed or renamed, a file written or
// truncated (IN_MODIFY), its mode changed (an unreadable file counts 0),
// and the dir itself removed or moved away.
const simWatchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// simWatch keeps each device's last settled reading for as long as the
// kernel (inotify) reports no change to its dir, so that a sample of an
// idle simulated GPU costs one read(2) that finds nothing, as a real GPU's
// query costs one call, instead of a directory listing. A sample is then
// proportional to change, not to time.
//
// The watch is added before the dir is listed, so a change made during
// the listing is reported by the next drain and that reading is dropped.
// Without inotify (the per-user limit of instances reached), or on a file
// system that inotify may not hear every change on (a network or FUSE
// file system, where another host or the server writes), every sample
// lists the dir.
type simWatch struct {
	fd    int                // the inotify instance; -1 until opened, or when there is none
	tried bool               // opening was tried
	wd    map[int]int        // device → its dir's watch descriptor, while watched
	dev   map[int32]int      // watch descriptor → device
	kept  map[int]simReading // device → its reading, while nothing changed
	// remote are the devices whose dir is on a file system inotify may not
	// hear every change on: never watched, and looked at (statfs) once.
	remote map[int]bool
	buf    []byte
	list   func(dir string, dev int) (simReading, error) // readSimDevice; a test counts the listings
}

func newSimWatch() *simWatch {
	return &simWatch{fd: -1, wd: map[int]int{}, dev: map[int32]int{}, kept: map[int]simReading{}, remote: map[int]bool{}, list: readSimDevice}
}

// read returns device i's usage: the kept reading when nothing changed
// since it was taken, else a fresh listing of dir, kept when it is settled
// and the dir is watched.
func (w *simWatch) read(i int, dir string) (simReading, error) {
	if r, ok := w.kept[i]; ok {
		return r, nil
	}
	watched := w.watch(i, dir)
	r, err := w.list(dir, i)
	if err == nil && watched && r.settled {
		w.kept[i] = r
	}
	return r, err
}

// drain reads the changes reported since the last drain and drops the
// readings they make stale. It is called once a sample, before any read.
func (w *simWatch) drain() {
	if w.fd < 0 {
		return
	}
	for {
		n, err := rawRead(w.fd, w.buf)
		if err != 0 || n <= 0 {
			if err != 0 && err != unix.EAGAIN && err != unix.EINTR {
				w.forgetAll() // an unreadable instance: list every time
				unix.Close(w.fd)
				w.fd = -1
			}
			return
		}
		w.events(w.buf[:n])
	}
}

// rawRead is read(2) on a non-blocking fd, made raw: it cannot block, and
// a system call made through the syscall package wakes the runtime's
// sysmon thread when it sleeps, one more thread wake-up a calm sample
// would cost for nothing (see supervisor/sense's NewKernelAlarm).
func rawRead(fd int, b []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// events applies one read's worth of inotify events.
func (w *simWatch) events(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:4]))
		mask := binary.NativeEndian.Uint32(b[4:8])
		size := int(binary.NativeEndian.Uint32(b[12:16]))
		b = b[min(len(b), unix.SizeofInotifyEvent+size):]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			clear(w.kept) // events were lost: anything may have changed
			continue
		}
		i, ok := w.dev[wd]
		if !ok {
			continue
		}
		delete(w.kept, i)
		switch {
		case mask&unix.IN_IGNORED != 0: // the dir is gone: its watch with it
			w.unwatch(i, wd)
		case mask&unix.IN_MOVE_SELF != 0:
			// The path now names another dir, or none. Removing the
			// watch queues IN_IGNORED, which this drain reads next.
			unix.InotifyRmWatch(w.fd, uint32(wd))
		}
	}
}

// watch makes sure device i's dir is watched, opening the inotify
// instance on first use; false when it cannot be (no dir yet, no inotify).
func (w *simWatch) watch(i int, dir string) bool {
	if _, ok := w.wd[i]; ok {
		return true
	}
	if !w.tried {
		w.tried = true
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			return false
		}
		w.fd, w.buf = fd, make([]byte, 4096)
	}
	if w.fd < 0 || w.remote[i] {
		return false
	}
	if local, known := localFS(dir); !local {
		w.remote[i] = known
		return false
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, simWatchMask)
	if err != nil {
		return false
	}
	w.wd[i], w.dev[int32(wd)] = wd, i
	return true
}

// localFS reports whether dir is on a local file system whose every change
// inotify reports; known is false when dir could not be looked at (it may
// not exist yet).
func localFS(dir string) (local, known bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false, false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.RAMFS_MAGIC, zfsSuperMagic:
		return true, true
	}
	return false, true
}

// zfsSuperMagic is OpenZFS's f_type, which x/sys/unix does not name.
const zfsSuperMagic = 0x2fc12fc1

func (w *simWatch) unwatch(i int, wd int32) {
	delete(w.dev, wd)
	if w.wd[i] == int(wd) {
		delete(w.wd, i)
	}
	delete(w.kept, i)
}

func (w *simWatch) forgetAll() {
	clear(w.kept)
	clear(w.wd)
	clear(w.dev)
}

// close releases the inotify instance.
func (w *simWatch) close() error {
	if w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd = -1
	w.forgetAll()
	return err
}
