package otelconnaudit_test

import (
	"testing"

	"github.com/connaudit/connaudit/otelconnaudit"
	"github.com/connaudit/connaudit/pool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
)

func TestOptionsRejected(t *testing.T) {
	_, err := otelconnaudit.NewObserver()
	require.ErrorContains(t, err, "neither MeterProvider nor TracerProvider")
	_, err = otelconnaudit.NewObserver(otelconnaudit.MeterProvider(nil))
	require.ErrorContains(t, err, "nil MeterProvider")
	_, err = otelconnaudit.NewObserver(otelconnaudit.TracerProvider(nil))
	require.ErrorContains(t, err, "nil TracerProvider")
	_, err = otelconnaudit.NewObserver(nil)
	require.ErrorContains(t, err, "nil option")

	s := newSDKs(t)
	traces, err := otelconnaudit.NewObserver(otelconnaudit.TracerProvider(s.tp))
	require.NoError(t, err)
	p, err := pool.New()
	require.NoError(t, err)
	defer p.Close()
	_, err = traces.Register(p)
	require.ErrorContains(t, err, "needs a MeterProvider")

	metrics, err := otelconnaudit.NewObserver(otelconnaudit.MeterProvider(noop.NewMeterProvider()))
	require.NoError(t, err)
	_, err = metrics.Register(nil)
	require.ErrorContains(t, err, "nil pool")
	reg, err := metrics.Register(p)
	require.NoError(t, err)
	require.NoError(t, reg.Unregister())
}
