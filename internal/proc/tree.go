package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Tree returns pid followed by all its descendants, parents before their
// children. It runs every probe tick with scope = "process", so it reads
// /proc once (each process's stat, for its parent). gopsutil's Children
// scans all of /proc for every process in the tree, and the
// /proc/<pid>/task/<tid>/children files need one read per thread of every
// process in the tree (an inference server has hundreds) and
// CONFIG_PROC_CHILDREN. A pid that does not exist is an error matching
// os.ErrNotExist.
func Tree(pid int) ([]int, error) {
	return tree("/proc", pid)
}

func tree(root string, pid int) ([]int, error) {
	d, err := os.Open(root)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	children := make(map[int][]int)
	found := false
	buf := make([]byte, 512)
	for _, name := range names {
		p, err := strconv.Atoi(name)
		if err != nil || p <= 0 {
			continue
		}
		ppid, err := readPPID(root+"/"+name+"/stat", buf)
		if err != nil {
			continue // it exited while we were looking
		}
		if p == pid {
			found = true
		}
		children[ppid] = append(children[ppid], p)
	}
	if !found {
		return nil, fmt.Errorf("process %d: %w", pid, os.ErrNotExist)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// readPPID reads the parent pid from a /proc/<pid>/stat file. It uses raw
// system calls and one buffer: os.ReadFile costs an allocation and a
// poller registration per process, and this runs for every process on the
// host every tick.
func readPPID(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return 0, err
	}
	return parsePPID(buf[:n])
}

// parsePPID extracts field 4 (ppid) from the text of /proc/<pid>/stat:
// "pid (comm) state ppid ...". comm may hold spaces and parentheses, so the
// fields are counted from the last ')'. The buffer may be a prefix of the
// file as long as it holds the ppid: nothing after comm contains ')'.
func parsePPID(stat []byte) (int, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed stat: no command name")
	}
	rest := stat[i+1:]
	if len(rest) > 64 {
		rest = rest[:64] // " S <ppid> " fits with room to spare
	}
	f := bytes.Fields(rest)
	if len(f) < 2 {
		return 0, errors.New("malformed stat: no parent pid")
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return 0, fmt.Errorf("malformed stat: parent pid: %w", err)
	}
	return ppid, nil
}
