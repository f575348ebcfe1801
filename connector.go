package windowaggregator

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
)

// What every instance has, of both forms. The collector builds a connector instance per (input,
// output) signal pair and hands each batch to every instance for its input: the ->traces and ->logs
// instances, when they exist, aggregate their signal and route its late data; the ->metrics instances
// then only deliver results. Each signal's file holds its instances (spans.go, logs.go).

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
	return in.s.shutdownInstance(ctx, in)
}

func (in *instance) Capabilities() consumer.Capabilities { return connectorCapabilities }

func lateActionFor(cfg *Config, routed bool) lateAction {
	if routed && cfg.LateData.Action != actionDrop {
		return lateRouted
	}
	return lateDropped // drop, or route with no traces->traces or logs->logs pipeline to take them
}

// acquireRouting acquires the component's state for an instance that routes the late records of
// input, and records, under the state's lock, that one does: that instance aggregates its signal.
func acquireRouting(ctx context.Context, set connector.Settings, cfg component.Config, input int) (*shared, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.routes[input] = true
	s.mu.Unlock()
	return s, nil
}
