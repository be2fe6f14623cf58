package connaudit_test

import (
	"net/http"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// protocols returns HTTP/1, with HTTP/2 if h2.
func protocols(h2 bool) http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(h2)
	return p
}
