package proc

import "strconv"

// Descendants returns those of pids that are root or descend from it. It
// walks each one's chain of parents in /proc, so its cost grows with the
// pids asked about (the processes that hold GPU memory, a handful), not
// with every process on the host as Tree's does. A pid that is gone, or
// whose chain reaches init without meeting root, is not root's.
func Descendants(root int, pids []int) []int {
	return descendants("/proc", root, pids)
}

func descendants(procRoot string, root int, pids []int) []int {
	known := map[int]bool{root: true} // pid -> descends from root
	buf := make([]byte, 512)
	var out []int
	for _, p := range pids {
		var chain []int
		mine, cur := false, p
		for depth := 0; depth < 256; depth++ {
			if v, ok := known[cur]; ok {
				mine = v
				break
			}
			if cur <= 1 {
				break
			}
			chain = append(chain, cur)
			ppid, err := readPPID(procRoot+"/"+strconv.Itoa(cur)+"/stat", buf)
			if err != nil {
				break
			}
			cur = ppid
		}
		for _, c := range chain {
			known[c] = mine
		}
		if mine {
			out = append(out, p)
		}
	}
	return out
}

// Owned returns those of pids that are the child's: with a cgroup of its
// own, the ones in it (a daemon that called setsid or double-forked
// included); else its main process and its descendants. scope = "process"
// counts the GPU memory of exactly these, and gpuguard waits for them to
// free it after an exit.
func (c *Child) Owned(pids []int) []int {
	if c.cg != nil {
		if in := c.cg.procs(); len(in) > 0 {
			member := make(map[int]bool, len(in))
			for _, p := range in {
				member[p] = true
			}
			var out []int
			for _, p := range pids {
				if member[p] {
					out = append(out, p)
				}
			}
			return out
		}
	}
	return Descendants(c.pid, pids)
}
