package probe_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connaudit/connaudit/probe"
)

// TestNilValues: a nil context or request is an error from Run, and the
// methods of a nil *Result return an error or zero values, never panic.
func TestNilValues(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	require.NoError(t, err)
	var nilCtx context.Context
	_, err = probe.Run(nilCtx, req)
	require.ErrorContains(t, err, "nil context")
	_, err = probe.Run(t.Context(), nil)
	require.ErrorContains(t, err, "nil target request")

	var rep *probe.Result
	require.ErrorContains(t, rep.WriteText(io.Discard, true), "nil *Result")
	require.ErrorContains(t, rep.WriteJSON(io.Discard), "nil *Result")
	require.ErrorContains(t, (&probe.Result{}).WriteJSON(nil), "nil writer")
	require.Zero(t, rep.Worst())
	require.False(t, rep.Fails("info"))
	_, ok := rep.Has("protocol-errors")
	require.False(t, ok)
	var unusable *probe.UnusableError
	require.Equal(t, "probe: nil *UnusableError", unusable.Error())
}
