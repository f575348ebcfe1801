package windowaggregator

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
)

// Processor instances, one per pipeline: in traces and logs pipelines (spans.go, logs.go) they
// aggregate and pass every record on unchanged; in a metrics pipeline, here, they pass metrics on and
// add the window results. Late data cannot leave the pipeline: it passes on with the rest and is
// counted.
type metricsProcessor struct {
	instance
	next consumer.Metrics
}

func (p *metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return p.next.ConsumeMetrics(ctx, md)
}

func createMetricsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &metricsProcessor{instance: newInstance(s, s.addSink(next, inputAny), -1, false), next: next}, nil
}
