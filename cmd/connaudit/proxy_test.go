package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A malformed rule, URL or flag is a clear error at start, exit 2, and
// no secret of the upstream's URL is in it.
func TestProxyUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-upstream URL is required"},
		{[]string{"-upstream", "ftp://x"}, "an http or https URL"},
		{[]string{"-upstream", "http://us3r:S3cr3tPassw0rd@127.0.0.1:1/?token=T0kenValue"}, "user information"},
		{[]string{"-upstream", "http://us3r:S3cr3tPassw0rd@127.0.0.1:bad/?token=T0kenValue"}, "not a URL"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-fault", "reset nth=zero"}, "nth=N"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-fault", "explode"}, "unknown action"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-guard", "-1s"}, "must not be negative"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-faults", "/nonexistent/rules"}, "-faults"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-client-header", "bad header"}, "no header name"},
		{[]string{"-upstream", "http://127.0.0.1:1", "-ca", "x.pem"}, "-ca needs -tls"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"proxy"}, c.args...), &out, &errb)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errb.String())
		require.Contains(t, errb.String(), c.want)
		for _, s := range []string{"S3cr3tPassw0rd", "T0kenValue", "us3r"} {
			require.NotContains(t, errb.String()+out.String(), s)
		}
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), errb.String())
	}
}
