package serve

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// An Option configures a [Server] at [New].
type Option interface {
	apply(*config)
}

type config struct {
	addr          string
	anyAddr       bool
	run, skip     *regexp.Regexp
	sourceNumbers bool
	serverIdle    time.Duration
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

// defaultServerIdle is the keep-alive timeout assumed of the servers a
// client talks to when [ServerIdleTimeout] says none, as the in-process
// audit assumes it: a load balancer's common idle timeout (AWS's
// Application Load Balancer's default).
const defaultServerIdle = 60 * time.Second

// ServerIdleTimeout says how long the servers the clients talk to keep an
// idle connection open (60s unless said): the keep-alive timeout that
// `connaudit probe -find-idle-timeout` measures on a real host. A client
// whose kit declares an idle timeout as long or longer (client.idle_timeout_ms,
// 0 for none) fails the scenarios whose server closes idle connections by
// itself: a request it sends as the server closes one is lost.
func ServerIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.err = errors.Join(c.err, fmt.Errorf("serve: ServerIdleTimeout %v must be positive", d))
			return
		}
		c.serverIdle = d
	})
}
