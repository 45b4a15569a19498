//go:build linux

package gpu

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// countedSim is a one-device Sim over a temp dir whose listings are
// counted.
func countedSim(t *testing.T) (s *Sim, dev string, listings *int) {
	t.Helper()
	dir := t.TempDir()
	s, err := NewSim(SimOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if local, _ := localFS(dir); !local {
		t.Skipf("%s is not on a file system whose changes inotify reports", dir)
	}
	listings = new(int)
	s.watch.list = func(dir string, dev int) (simReading, error) {
		*listings++
		return readSimDevice(dir, dev)
	}
	return s, filepath.Join(dir, "0"), listings
}

// sampleUsed samples s and returns device 0's used bytes and how many
// listings it took.
func sampleUsed(t *testing.T, s *Sim, listings *int) (used uint64, listed int) {
	t.Helper()
	before := *listings
	smp, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return smp.Devices[0].Used, *listings - before
}

// TestSimListsOnlyOnChange: an idle device is listed once, and every later
// change to its dir (a file made, rewritten in place, renamed into place,
// removed, its mode changed; the dir removed and made again, or moved away
// and replaced) is read at the next sample.
func TestSimListsOnlyOnChange(t *testing.T) {
	s, dev, listings := countedSim(t)
	want := func(step string, used uint64, listed int) {
		t.Helper()
		if u, l := sampleUsed(t, s, listings); u != used || l != listed {
			t.Errorf("%s: used %d after %d listings, want %d after %d", step, u, l, used, listed)
		}
	}
	want("first sample", 0, 1)
	want("idle", 0, 0)
	want("idle again", 0, 0)

	writeFile(t, filepath.Join(dev, "a"), "100")
	want("a made", 100, 1)
	want("a kept", 100, 0)
	writeFile(t, filepath.Join(dev, "a"), "300") // O_TRUNC, in place
	want("a rewritten", 300, 1)
	if err := SimSet(filepath.Dir(dev), 0, "b", 5); err != nil { // a temp name renamed into place
		t.Fatal(err)
	}
	want("b set", 305, 1)
	want("b kept", 305, 0)
	if err := os.Chmod(filepath.Join(dev, "a"), 0o600); err != nil {
		t.Fatal(err)
	}
	want("a's mode changed", 305, 1)
	if err := os.Remove(filepath.Join(dev, "a")); err != nil {
		t.Fatal(err)
	}
	want("a removed", 5, 1)

	if err := os.RemoveAll(dev); err != nil {
		t.Fatal(err)
	}
	want("dir removed", 0, 1)
	writeFile(t, filepath.Join(dev, "c"), "7")
	want("dir made again", 7, 1)
	want("the new dir watched", 7, 0)
	writeFile(t, filepath.Join(dev, "c"), "8")
	want("a file of the new dir rewritten", 8, 1)

	if err := os.Rename(dev, dev+".old"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dev, "d"), "9")
	want("dir moved away and replaced", 9, 1)
	writeFile(t, filepath.Join(dev+".old", "c"), "1000")
	want("the old dir written", 9, 0)
	writeFile(t, filepath.Join(dev, "d"), "10")
	want("the replacement written", 10, 1)
}

// TestSimListsVolatileEverySample: a PID-named file counts only while its
// process lives and a symlink's target changes outside the dir, so a dir
// with either is listed at every sample.
func TestSimListsVolatileEverySample(t *testing.T) {
	for name, make := range map[string]func(t *testing.T, dev string){
		"pid": func(t *testing.T, dev string) {
			writeFile(t, filepath.Join(dev, strconv.Itoa(os.Getpid())), "10")
		},
		"symlink": func(t *testing.T, dev string) {
			target := filepath.Join(t.TempDir(), "usage")
			writeFile(t, target, "10")
			if err := os.Symlink(target, filepath.Join(dev, "linked")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, dev, listings := countedSim(t)
			make(t, dev)
			for i := range 3 {
				if used, listed := sampleUsed(t, s, listings); used != 10 || listed != 1 {
					t.Errorf("sample %d: used %d after %d listings, want 10 after 1", i, used, listed)
				}
			}
		})
	}
}

// TestSimWithoutInotifyListsEverySample: when no inotify instance can be
// had (the per-user limit), every sample lists.
func TestSimWithoutInotifyListsEverySample(t *testing.T) {
	s, _, listings := countedSim(t)
	s.watch.tried = true // as if inotify_init1 had failed
	for i := range 3 {
		if _, listed := sampleUsed(t, s, listings); listed != 1 {
			t.Errorf("sample %d: %d listings, want 1", i, listed)
		}
	}
}

// TestSimWatchOverflowDropsReadings: when the kernel drops events (its
// queue overflowed), no kept reading is trusted.
func TestSimWatchOverflowDropsReadings(t *testing.T) {
	s, _, listings := countedSim(t)
	sampleUsed(t, s, listings)
	if len(s.watch.kept) != 1 {
		t.Fatalf("kept %v after the first sample, want device 0's reading", s.watch.kept)
	}
	ev := make([]byte, unix.SizeofInotifyEvent)
	binary.NativeEndian.PutUint32(ev[0:4], ^uint32(0)) // wd -1
	binary.NativeEndian.PutUint32(ev[4:8], unix.IN_Q_OVERFLOW)
	s.watch.events(ev)
	if _, listed := sampleUsed(t, s, listings); listed != 1 {
		t.Errorf("%d listings after an overflow, want 1", listed)
	}
}

// TestSimCloseReleasesTheWatch: Close closes the inotify instance.
func TestSimCloseReleasesTheWatch(t *testing.T) {
	s, _, listings := countedSim(t)
	sampleUsed(t, s, listings)
	fd := s.watch.fd
	if fd < 0 {
		t.Fatal("no inotify instance after a sample")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("fd %d after Close: %v, want EBADF", fd, err)
	}
}

// TestLocalFS: procfs is not a file system whose writes inotify reports;
// a dir that is not there is not known either way.
func TestLocalFS(t *testing.T) {
	if local, known := localFS("/proc"); local || !known {
		t.Errorf("localFS(/proc) = %v, %v; want false, true", local, known)
	}
	if local, known := localFS("/nonexistent/gpuguard"); local || known {
		t.Errorf("localFS of a missing dir = %v, %v; want false, false", local, known)
	}
}

// TestSimRemoteDirNotWatched: a device dir once found on a file system
// inotify may not hear every change on is never watched again (its file
// system is not looked at every sample) and is listed every sample.
func TestSimRemoteDirNotWatched(t *testing.T) {
	s, _, listings := countedSim(t)
	s.watch.remote[0] = true // as if localFS had said so
	for i := range 3 {
		if _, listed := sampleUsed(t, s, listings); listed != 1 {
			t.Errorf("sample %d: %d listings, want 1", i, listed)
		}
	}
	if len(s.watch.wd) != 0 {
		t.Errorf("a remote dir was watched: %v", s.watch.wd)
	}
}

// TestSimCloseDuringSample: the run closes the probe as it ends, while the
// sampler may still be in a call; under the race detector this fails
// unless the two are ordered.
func TestSimCloseDuringSample(t *testing.T) {
	s, _, listings := countedSim(t)
	sampleUsed(t, s, listings)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			s.Sample(context.Background())
		}
	}()
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	<-done
}
