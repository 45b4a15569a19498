package proc

// Processes lists the child's processes: with a cgroup of its own, every
// process in it (a daemon that called setsid or double-forked included),
// else its main process and descendants by parentage. scope = "process"
// counts the GPU memory of exactly these.
func (c *Child) Processes() ([]int, error) {
	if c.cg != nil {
		if pids := c.cg.procs(); len(pids) > 0 {
			return pids, nil
		}
	}
	return Tree(c.pid)
}
