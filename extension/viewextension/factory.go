// Package viewextension is the window_aggregator_view extension: it serves, read only, the operator's
// view of every window_aggregator component id running in its collector: the page (GET /), its JSON
// (/api/v1/components), the series explainer (/api/v1/series) and the charts' history
// (/api/v1/history). docs/view.md describes them.
package viewextension

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
)

// Type is the extension's type.
var Type = component.MustNewType("window_aggregator_view")

// NewFactory returns the extension's factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(Type, createDefaultConfig, create, component.StabilityLevelDevelopment)
}

func createDefaultConfig() component.Config {
	cfg := &Config{}
	cfg.ServerConfig = confighttpDefault()
	return cfg
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &viewExtension{cfg: cfg.(*Config), set: set}, nil
}
