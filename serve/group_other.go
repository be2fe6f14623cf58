//go:build !unix

package serve

// Without process groups, the command alone is stopped.

func (g *group) prepare() {}

func (g *group) signal(bool) { g.cmd.Process.Kill() }

func (g *group) alive() bool { return false }
