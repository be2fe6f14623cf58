package pooltest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/connaudit/connaudit/pool"
	"github.com/connaudit/connaudit/pool/pooltest"
)

// printT stands for the test's *testing.T: it prints the first problem of
// each error, up to the request's id.
type printT struct{ host string }

func (printT) Helper() {}
func (t printT) Error(args ...any) {
	first, _, _ := strings.Cut(fmt.Sprint(args...), " (request")
	fmt.Println("error:", strings.ReplaceAll(first, t.host, "HOST"))
}

// ExampleVerifyNone ends a test by checking that the pool left nothing
// behind; here a response body was never closed, which it names.
func ExampleVerifyNone() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	p, err := pool.New()
	if err != nil {
		panic(err)
	}
	resp, err := p.Client().Get(srv.URL + "/forgotten")
	if err != nil {
		panic(err)
	}

	t := printT{host: srv.URL} // in a test: t *testing.T
	pooltest.VerifyNone(t, p)

	resp.Body.Close()
	srv.Close()
	// Output:
	// error: open body: GET HOST/forgotten
}
