package serve

import "regexp"

// An Option configures a [Server] at [New].
type Option interface {
	apply(*config)
}

type config struct {
	addr          string
	anyAddr       bool
	run, skip     *regexp.Regexp
	sourceNumbers bool
	onEnd         []func(*SessionReport)
	err           error // a bad option's
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Addr makes the control API listen on addr ("host:port") instead of
// "127.0.0.1:0". A host that is not loopback is refused unless
// [AllowRemote] is given too. The fault listeners stay on 127.0.0.1.
func Addr(addr string) Option {
	return optionFunc(func(c *config) { c.addr = addr })
}

// AllowRemote lets [Addr] name an address that is not loopback.
func AllowRemote() Option {
	return optionFunc(func(c *config) { c.anyAddr = true })
}

// Select offers kits only the scenarios whose name matches run (nil: all)
// and not skip (nil: none), on top of a kit's own selection.
func Select(run, skip *regexp.Regexp) Option {
	return optionFunc(func(c *config) { c.run, c.skip = run, skip })
}

// SourceNumbers serves the retry contracts at the source documents' own
// numbers where the catalogue scales them down to save time: A6 an
// attempt of 1 s; A8 an attempt of 1 s, a total of 1.5 s and a delay of
// 1 s; A9 an attempt of 500 ms, a total of 2 s, a delay of 200 ms and each
// answer after 400 ms (100 ms of slack: a loaded machine may overrun it).
// The other scenarios keep the catalogue's bounds, which are its own, not
// the source's.
func SourceNumbers() Option {
	return optionFunc(func(c *config) { c.sourceNumbers = true })
}
