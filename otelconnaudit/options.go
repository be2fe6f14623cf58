package otelconnaudit

import (
	"errors"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures an [Observer]. Options are applied in order; an option
// whose value makes no sense is an error from [NewObserver].
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// MeterProvider exports the metrics through mp: the per-request histograms
// and counters as requests go, the pool's own numbers each time a reader
// collects ([Observer.Register]). Without it, no metrics.
func MeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		if mp == nil {
			return errors.New("otelconnaudit: nil MeterProvider")
		}
		c.mp = mp
		return nil
	})
}

// TracerProvider exports each request's stages as spans through tp, under
// the span in the request's context. Without it, no spans.
func TracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) error {
		if tp == nil {
			return errors.New("otelconnaudit: nil TracerProvider")
		}
		c.tp = tp
		return nil
	})
}
