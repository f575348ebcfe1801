package windowaggregator

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
)

// The instances of both forms, written once, generic over a signal's pdata B (ptrace.Traces,
// plog.Logs, pmetric.Metrics). The collector builds a connector instance per (input, output) signal
// pair and hands each batch to every instance for its input: the ->traces and ->logs instances, when
// they exist, aggregate their signal and route its late data; the ->metrics instances then only
// deliver results. A signal's file gives the forms its pdata's method names (ConsumeTraces, ...) and
// its ingest function, and nothing else.

var connectorCapabilities = consumer.Capabilities{MutatesData: false}

// instance is what every instance has: the shared state, for a metrics output its sink, and for an
// instance that ingests records the input signal it is a feed of (see shared.addFeed).
type instance struct {
	s         *shared
	sink      *delivery.Sink
	feed      int // the input it ingests, or -1
	connector bool
}

// newInstance makes an instance, registering it as a feed of input (-1: none).
func newInstance(s *shared, k *delivery.Sink, feed int, connector bool) instance {
	if feed >= 0 {
		s.addFeed(feed, connector)
	}
	return instance{s: s, sink: k, feed: feed, connector: connector}
}

func (in *instance) Start(ctx context.Context, host component.Host) error {
	return in.s.start(ctx, host)
}

func (in *instance) Shutdown(ctx context.Context) error {
	if in.s == nil {
		return nil
	}
	return in.s.shutdownInstance(ctx, in.feed, in.connector, in.sink)
}

func (in *instance) Capabilities() consumer.Capabilities { return connectorCapabilities }

// ingestFunc aggregates a batch of a signal's records, its late ones as action says; with ingest.LateRouted
// it returns a copy of the late ones, and routed true, when some are late. err is an OTTL error with
// error_mode propagate: the records are aggregated all the same, and the batch is to be refused.
type ingestFunc[B any] func(c *ingest.Core, ctx context.Context, b B, action ingest.LateAction) (late B, routed bool, err error)

// toMetrics is a connector's B->metrics instance. It aggregates a batch unless a B->B instance exists,
// which the collector hands the same batches and which routes the late records besides.
type toMetrics[B any] struct {
	instance
	ingest ingestFunc[B]
}

func (c *toMetrics[B]) consume(ctx context.Context, b B) error {
	if c.s.routes[c.feed] {
		return nil // the B->B instance aggregates this batch
	}
	_, _, err := c.ingest(&c.s.Core, ctx, b, lateActionFor(c.s.cfg, false))
	return err
}

// onward is an instance that sends batches of B on to next: a connector's B->B instance, which
// aggregates a batch and sends its late records on (route); the processor in a pipeline of B, which
// aggregates a batch and passes every record on unchanged, late ones included (pass).
type onward[B any] struct {
	instance
	ingest ingestFunc[B]
	next   func(context.Context, B) error
}

func (c *onward[B]) route(ctx context.Context, b B) error {
	late, routed, err := c.ingest(&c.s.Core, ctx, b, lateActionFor(c.s.cfg, true))
	if routed {
		err = errors.Join(err, c.next(ctx, late))
	}
	return err
}

func (c *onward[B]) pass(ctx context.Context, b B) error {
	if _, _, err := c.ingest(&c.s.Core, ctx, b, ingest.LatePassed); err != nil {
		return err // error_mode propagate: the batch is refused
	}
	return c.next(ctx, b)
}

func lateActionFor(cfg *Config, routed bool) ingest.LateAction {
	if routed && cfg.LateData.Action != actionDrop {
		return ingest.LateRouted
	}
	return ingest.LateDropped // drop, or route with no traces->traces or logs->logs pipeline to take them
}

// signalForms is what a signal gives the generic forms: its input, its ingest function, the consume
// method of its next consumer N, and how its thin types (C for a connector, P for a processor)
// wrap the forms. Its methods are the factories' create functions.
type signalForms[B, N, C, P any] struct {
	input     int
	ingest    ingestFunc[B]
	consumeOf func(N) func(context.Context, B) error
	toMetrics func(*toMetrics[B]) C
	routing   func(*onward[B]) C
	passing   func(*onward[B]) P
}

func (f *signalForms[B, N, C, P]) createToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (c C, err error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return c, err
	}
	return f.toMetrics(&toMetrics[B]{instance: newInstance(s, s.addSink(next, f.input), f.input, true), ingest: f.ingest}), nil
}

// createRouting acquires the component's state for the B->B instance, and records, under the state's
// lock, that one exists: that instance aggregates its signal.
func (f *signalForms[B, N, C, P]) createRouting(ctx context.Context, set connector.Settings, cfg component.Config, next N) (c C, err error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return c, err
	}
	s.mu.Lock()
	s.routes[f.input] = true
	s.mu.Unlock()
	return f.routing(&onward[B]{instance: newInstance(s, nil, f.input, true), ingest: f.ingest, next: f.consumeOf(next)}), nil
}

func (f *signalForms[B, N, C, P]) createPassing(ctx context.Context, set processor.Settings, cfg component.Config, next N) (p P, err error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return p, err
	}
	return f.passing(&onward[B]{instance: newInstance(s, nil, f.input, false), ingest: f.ingest, next: f.consumeOf(next)}), nil
}
