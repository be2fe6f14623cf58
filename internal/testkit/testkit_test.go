package testkit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/connaudit/connaudit/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// A bounded context ends with the test.
func TestBoundedEndsWithTheTest(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = testkit.Bounded(t)
		if ctx.Err() != nil {
			t.Fatal("ended before the test did")
		}
	})
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("ended with %v, want the test's end", ctx.Err())
	}
}
