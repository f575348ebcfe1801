package windowaggregator

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/xconnector"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/xprocessor"
)

var (
	// Type is the component type of both forms.
	Type = component.MustNewType("window_aggregator")
	// aliasType is the other spelling that configurations may use.
	aliasType = component.MustNewType("windowaggregator")
)

const stability = component.StabilityLevelAlpha

// NewFactory returns the processor form's factory (traces, logs, metrics pipelines).
func NewFactory() processor.Factory {
	return xprocessor.NewFactory(Type, createDefaultConfig,
		xprocessor.WithTraces(createTracesProcessor, stability),
		xprocessor.WithLogs(createLogsProcessor, stability),
		xprocessor.WithMetrics(createMetricsProcessor, stability),
		xprocessor.WithDeprecatedTypeAlias(aliasType),
	)
}

// NewConnectorFactory returns the connector form's factory: traces->metrics, logs->metrics,
// metrics->metrics, and, for late data, traces->traces and logs->logs.
func NewConnectorFactory() connector.Factory {
	return xconnector.NewFactory(Type, createDefaultConfig,
		xconnector.WithTracesToMetrics(createTracesToMetrics, stability),
		xconnector.WithLogsToMetrics(createLogsToMetrics, stability),
		xconnector.WithMetricsToMetrics(createMetricsToMetrics, stability),
		xconnector.WithTracesToTraces(createTracesToTraces, stability),
		xconnector.WithLogsToLogs(createLogsToLogs, stability),
		xconnector.WithDeprecatedTypeAlias(aliasType),
	)
}
