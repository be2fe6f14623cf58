package audit

import (
	"path"
	"reflect"
	"runtime"

	"github.com/connaudit/connaudit/pool"
)

// The options a fix, a bound or a skip names, by their Go names taken from
// the functions themselves: a rename changes every text that names one,
// and one removed fails to compile. (The http.Transport fields they name
// are checked by the module's TestSettingNamesExist.)
var (
	nameBodyIdleTimeout   = goName(pool.BodyIdleTimeout)
	nameConnectTimeout    = goName(pool.ConnectTimeout)
	nameTrack             = goName(pool.Track)
	nameWithTransport     = goName(WithTransport)
	nameWithRoundTripper  = goName(WithRoundTripper)
	nameGuardDeadline     = goName(GuardDeadline)
	nameProtocols         = goName(Protocols)
	nameServerIdleTimeout = goName(ServerIdleTimeout)
)

// goName returns the name of the function f as its package's users write
// it: "pool.BodyIdleTimeout".
func goName(f any) string {
	return path.Base(runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name())
}
