package windowaggregator

import (
	"context"
	"errors"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
)

// The instances of each signal, under its pdata names: the forms of instance.go for ptrace, plog
// and pmetric, and the metrics processor's drop_aggregated_input.

// The instances that take traces: the forms of instance.go, under ptrace's names.
type (
	tracesToMetrics struct{ *toMetrics[ptrace.Traces] }
	tracesToTraces  struct{ *onward[ptrace.Traces] }
	tracesProcessor struct{ *onward[ptrace.Traces] }
)

func (c tracesToMetrics) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return c.consume(ctx, td)
}

func (c tracesToTraces) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return c.route(ctx, td)
}

func (p tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return p.pass(ctx, td)
}

var tracesForms = &signalForms[ptrace.Traces, consumer.Traces, connector.Traces, processor.Traces]{
	input: ingest.InputSpans, ingest: (*ingest.Core).Traces,
	consumeOf: func(next consumer.Traces) func(context.Context, ptrace.Traces) error { return next.ConsumeTraces },
	toMetrics: func(c *toMetrics[ptrace.Traces]) connector.Traces { return tracesToMetrics{c} },
	routing:   func(c *onward[ptrace.Traces]) connector.Traces { return tracesToTraces{c} },
	passing:   func(p *onward[ptrace.Traces]) processor.Traces { return tracesProcessor{p} },
}

// The instances that take logs: the forms of instance.go, under plog's names.
type (
	logsToMetrics struct{ *toMetrics[plog.Logs] }
	logsToLogs    struct{ *onward[plog.Logs] }
	logsProcessor struct{ *onward[plog.Logs] }
)

func (c logsToMetrics) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return c.consume(ctx, ld)
}

func (c logsToLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return c.route(ctx, ld)
}

func (p logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return p.pass(ctx, ld)
}

var logsForms = &signalForms[plog.Logs, consumer.Logs, connector.Logs, processor.Logs]{
	input: ingest.InputLogs, ingest: (*ingest.Core).Logs,
	consumeOf: func(next consumer.Logs) func(context.Context, plog.Logs) error { return next.ConsumeLogs },
	toMetrics: func(c *toMetrics[plog.Logs]) connector.Logs { return logsToMetrics{c} },
	routing:   func(c *onward[plog.Logs]) connector.Logs { return logsToLogs{c} },
	passing:   func(p *onward[plog.Logs]) processor.Logs { return logsProcessor{p} },
}

// The instances that take metrics: the connector's metrics->metrics instance aggregates and sends
// window results only; the processor aggregates its pipeline's metrics and passes them on (without
// the points taken, with drop_aggregated_input), the window results besides.
type (
	metricsToMetrics struct{ *toMetrics[pmetric.Metrics] }
	metricsProcessor struct{ *onward[pmetric.Metrics] }
)

func (c metricsToMetrics) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return c.consume(ctx, md)
}

func (p metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if p.s.cfg.DropAggregatedInput && md.DataPointCount() > 0 {
		if _, _, err := p.ingest(&p.s.Core, ctx, md, ingest.LatePassed); err != nil || md.DataPointCount() == 0 {
			return err // error_mode propagate: the batch is refused; or every point was taken
		}
		return p.next(ctx, md)
	}
	return p.pass(ctx, md)
}

// Capabilities: removing the points taken changes the batch.
func (p metricsProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: p.s.cfg.DropAggregatedInput}
}

var metricsForms = &signalForms[pmetric.Metrics, consumer.Metrics, connector.Metrics, processor.Metrics]{
	input: ingest.InputMetrics, ingest: (*ingest.Core).Metrics,
	consumeOf: func(next consumer.Metrics) func(context.Context, pmetric.Metrics) error { return next.ConsumeMetrics },
	toMetrics: func(c *toMetrics[pmetric.Metrics]) connector.Metrics { return metricsToMetrics{c} },
	passing:   func(p *onward[pmetric.Metrics]) processor.Metrics { return metricsProcessor{p} },
}

var errDropInConnector = errors.New("drop_aggregated_input applies to the processor form only: the connector never passes its input on")

func createMetricsToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Metrics, error) {
	if cfg.(*Config).DropAggregatedInput {
		return nil, errDropInConnector
	}
	return metricsForms.createToMetrics(ctx, set, cfg, next)
}

// createMetricsProcessor makes the processor in a metrics pipeline: a feed of metric points, and a
// metrics output of every signal's results.
func createMetricsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	p, err := metricsForms.createPassing(ctx, set, cfg, next)
	if err != nil {
		return nil, err
	}
	mp := p.(metricsProcessor)
	mp.sink = mp.s.addSink(next, ingest.InputAny)
	return mp, nil
}
