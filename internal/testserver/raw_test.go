package testserver_test

import (
	"bufio"
	"io"
	"net"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
	"github.com/connaudit/connaudit/internal/testserver"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func TestRawServesEachConnectionAndCleansUp(t *testing.T) {
	served := make(chan struct{}, 2)
	var addr string
	t.Run("server", func(t *testing.T) {
		ln := testserver.Raw(t, func(c net.Conn) {
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil {
				io.WriteString(c, "echo "+line)
			}
			served <- struct{}{}
		})
		addr = ln.Addr().String()
		for range 2 {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			_, err = io.WriteString(c, "hi\n")
			require.NoError(t, err)
			got, err := io.ReadAll(c) // the server closes after serve returns
			require.NoError(t, err)
			require.Equal(t, "echo hi\n", string(got))
			c.Close()
			<-served
		}
	})
	// The subtest's cleanup closed the listener.
	_, err := net.Dial("tcp", addr)
	require.Error(t, err)
}
