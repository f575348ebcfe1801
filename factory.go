package windowaggregator

import (
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/xconnector"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/xprocessor"

	"github.com/windowaggregator/windowaggregator/internal/metadata"
)

var (
	// Type is the component type of both forms.
	Type = metadata.Type
	// aliasType is the other spelling that configurations may use.
	aliasType = metadata.DeprecatedType
)

// NewFactory returns the processor form's factory (traces, logs, metrics pipelines).
func NewFactory() processor.Factory {
	return xprocessor.NewFactory(Type, createDefaultConfig,
		xprocessor.WithTraces(tracesForms.createPassing, metadata.TracesStability),
		xprocessor.WithLogs(logsForms.createPassing, metadata.LogsStability),
		xprocessor.WithMetrics(createMetricsProcessor, metadata.MetricsStability),
		xprocessor.WithDeprecatedTypeAlias(aliasType),
	)
}

// NewConnectorFactory returns the connector form's factory: traces->metrics, logs->metrics,
// metrics->metrics, and, for late data, traces->traces and logs->logs. Its stability is the
// component's (metadata.yaml); connector/metadata.yaml, which says the same of each pair, describes
// the connector for the builder.
func NewConnectorFactory() connector.Factory {
	return xconnector.NewFactory(Type, createDefaultConfig,
		xconnector.WithTracesToMetrics(tracesForms.createToMetrics, metadata.TracesStability),
		xconnector.WithLogsToMetrics(logsForms.createToMetrics, metadata.LogsStability),
		xconnector.WithMetricsToMetrics(createMetricsToMetrics, metadata.MetricsStability),
		xconnector.WithTracesToTraces(tracesForms.createRouting, metadata.TracesStability),
		xconnector.WithLogsToLogs(logsForms.createRouting, metadata.LogsStability),
		xconnector.WithDeprecatedTypeAlias(aliasType),
	)
}
