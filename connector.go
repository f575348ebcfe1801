package windowaggregator

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Connector instances. The collector builds one per (input, output) signal pair and hands each batch
// to every instance for its input: the ->traces and ->logs instances, when they exist, aggregate their
// signal and route its late data; the ->metrics instances then only deliver results.

var connectorCapabilities = consumer.Capabilities{MutatesData: false}

// instance is what every instance has: the shared state, for a metrics output its sink, and for an
// instance that ingests records the input signal it is a feed of (see shared.addFeed).
type instance struct {
	s         *shared
	sink      *sink
	feed      int // inputSpans, inputLogs, or -1
	connector bool
}

// newInstance makes an instance, registering it as a feed of input (-1: none).
func newInstance(s *shared, k *sink, feed int, connector bool) instance {
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
	return in.s.shutdownInstance(ctx, in)
}

func (in *instance) Capabilities() consumer.Capabilities { return connectorCapabilities }

func lateActionFor(cfg *Config, routed bool) lateAction {
	if routed && cfg.LateData.Action != actionDrop {
		return lateRouted
	}
	return lateDropped // drop, or route with no traces->traces or logs->logs pipeline to take them
}

type tracesToMetrics struct{ instance }

func (c *tracesToMetrics) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if c.s.lateTraces != nil {
		return nil // the traces->traces instance aggregates this batch
	}
	c.s.ingestTraces(ctx, td, lateActionFor(c.s.cfg, false))
	return nil
}

type logsToMetrics struct{ instance }

func (c *logsToMetrics) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if c.s.lateLogs != nil {
		return nil // the logs->logs instance aggregates this batch
	}
	c.s.ingestLogs(ctx, ld, lateActionFor(c.s.cfg, false))
	return nil
}

type tracesToTraces struct {
	instance
	next consumer.Traces
}

func (c *tracesToTraces) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	late, routed := c.s.ingestTraces(ctx, td, lateActionFor(c.s.cfg, true))
	if !routed {
		return nil
	}
	return c.next.ConsumeTraces(ctx, late)
}

type logsToLogs struct {
	instance
	next consumer.Logs
}

func (c *logsToLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	late, routed := c.s.ingestLogs(ctx, ld, lateActionFor(c.s.cfg, true))
	if !routed {
		return nil
	}
	return c.next.ConsumeLogs(ctx, late)
}

func createTracesToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &tracesToMetrics{newInstance(s, s.addSink(next, inputSpans), inputSpans, true)}, nil
}

func createLogsToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Logs, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &logsToMetrics{newInstance(s, s.addSink(next, inputLogs), inputLogs, true)}, nil
}

func createTracesToTraces(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (connector.Traces, error) {
	s, err := acquireRouting(ctx, set, cfg, func(s *shared) { s.lateTraces = next })
	if err != nil {
		return nil, err
	}
	return &tracesToTraces{instance: newInstance(s, nil, inputSpans, true), next: next}, nil
}

func createLogsToLogs(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Logs, error) {
	s, err := acquireRouting(ctx, set, cfg, func(s *shared) { s.lateLogs = next })
	if err != nil {
		return nil, err
	}
	return &logsToLogs{instance: newInstance(s, nil, inputLogs, true), next: next}, nil
}

// acquireRouting acquires the component's state for an instance that routes late data, and lets
// setNext record, under the state's lock, the pipeline that takes it.
func acquireRouting(ctx context.Context, set connector.Settings, cfg component.Config, setNext func(*shared)) (*shared, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	setNext(s)
	s.mu.Unlock()
	return s, nil
}
