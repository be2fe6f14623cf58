// Package pooltest checks, at the end of a test, that a [pool.Pool] left
// nothing behind: no open response body, no active connection, no more
// connections than its cap, and no leaked goroutine (goleak), each leaked
// net/http goroutine named by its cause.
//
// It is apart from package pool so that a service that imports pool links
// neither package testing nor goleak; it links neither itself, as goleak's
// own helpers do not, taking any [TestingT].
package pooltest

import (
	"context"
	"errors"
	"time"

	"go.uber.org/goleak"

	"github.com/connaudit/connaudit/internal/leaks"
	"github.com/connaudit/connaudit/pool"
)

// TestingT is the part of *testing.T that VerifyNone uses.
type TestingT interface {
	Helper()
	Error(args ...any)
}

// VerifyNone fails t if p does not pass [pool.Pool.Check] within five
// seconds, or goroutines leaked (goleak, with opts), naming each leaked
// net/http goroutine by its cause, such as "connection held by an unclosed
// response body or an idle connection (net/http.(*persistConn).readLoop)".
// Call it at the end of a test, after closing what the test opened (a
// running httptest.Server is goroutines too); it closes p's idle
// connections first so that they do not count as leaks.
func VerifyNone(t TestingT, p *pool.Pool, opts ...goleak.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if err := p.Check(ctx); err != nil {
		errs = append(errs, err)
	}
	p.CloseIdleConnections()
	if err := goleak.Find(opts...); err != nil {
		errs = append(errs, leaks.Name(err))
	}
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}
