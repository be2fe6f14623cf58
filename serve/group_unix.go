//go:build unix

package serve

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// prepare starts the command in a process group of its own, whose id is
// its pid, so that whatever it starts can be signalled with it.
func (g *group) prepare() {
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signal sends SIGTERM, or SIGKILL, to every process of the group.
func (g *group) signal(kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-g.cmd.Process.Pid, sig)
}

// alive reports whether a process of the group runs. A zombie does not:
// it is dead, and waits only for its parent (init, once the group's
// leader is gone, and an init that reaps nothing leaves it there). Where
// /proc tells the processes' states (Linux) it is read; elsewhere any
// process of the group counts.
func (g *group) alive() bool {
	pgid := g.cmd.Process.Pid
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	seen := false
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		seen = true
		// pid (comm) state ppid pgrp …: comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		if pg, err := strconv.Atoi(string(f[2])); err == nil && pg == pgid && string(f[0]) != "Z" {
			return true
		}
	}
	return !seen // no process seen: /proc is not what it is on Linux
}
