package windowaggregator

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
)

// Processor instances, one per pipeline: in traces and logs pipelines they aggregate and pass every
// record on unchanged; in a metrics pipeline they pass metrics on and add the window results. Late
// data cannot leave the pipeline: it passes on with the rest and is counted.
type tracesProcessor struct {
	instance
	next consumer.Traces
}

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	p.s.ingestTraces(ctx, td, latePassed)
	return p.next.ConsumeTraces(ctx, td)
}

type logsProcessor struct {
	instance
	next consumer.Logs
}

func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	p.s.ingestLogs(ctx, ld, latePassed)
	return p.next.ConsumeLogs(ctx, ld)
}

type metricsProcessor struct {
	instance
	next consumer.Metrics
}

func (p *metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return p.next.ConsumeMetrics(ctx, md)
}

func createTracesProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &tracesProcessor{instance: newInstance(s, nil, inputSpans, false), next: next}, nil
}

func createLogsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &logsProcessor{instance: newInstance(s, nil, inputLogs, false), next: next}, nil
}

func createMetricsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &metricsProcessor{instance: newInstance(s, s.addSink(next, inputAny), -1, false), next: next}, nil
}
