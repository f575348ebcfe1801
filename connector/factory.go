// Package connector exposes the window_aggregator connector factory under the name NewFactory, so
// that the collector builder (ocb) can import it like any other connector.
package connector

import (
	"go.opentelemetry.io/collector/connector"

	"github.com/windowaggregator/windowaggregator"
)

// NewFactory returns the window_aggregator connector factory.
func NewFactory() connector.Factory { return windowaggregator.NewConnectorFactory() }
