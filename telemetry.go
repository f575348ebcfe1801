package windowaggregator

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/windowaggregator/windowaggregator/internal/metadata"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// telemetry is the component's self-telemetry: the instruments declared in metadata.yaml
// (telemetry:) and made by the generated TelemetryBuilder (internal/metadata, `make generate`), and
// the one callback that observes the engine's counters. The names are listed in the README.
type telemetry struct {
	*metadata.TelemetryBuilder
	meter        metric.Meter // the builder's meter, for the one callback of observe
	registration metric.Registration
}

// Outcome attribute values, as option lists: passing a list with ... reuses it, where passing one
// option builds a new list per call (an allocation per batch).
var (
	attrOutcomeAggregated  = outcomeOption("aggregated")
	attrOutcomeLateUpdated = outcomeOption("late_updated")
	attrOutcomeLate        = outcomeOption("late")
	attrOutcomeUnmatched   = outcomeOption("unmatched")
)

// attrReasonAheadOfClock is the clock-skew counter's one reason.
var attrReasonAheadOfClock = []metric.AddOption{reasonAttr("ahead_of_clock")}

// heldByOptions are the watermark lag's attribute sets, by what holds W back.
var heldByOptions = func() (o []metric.ObserveOption) {
	for h := stream.HeldBy(0); h.String() != "unknown"; h++ {
		o = append(o, metric.WithAttributeSet(attribute.NewSet(attribute.String("held_by", h.String()))))
	}
	return o
}()

func outcomeOption(outcome string) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", outcome)))}
}

func lateAttrs(reason, action string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason), attribute.String("action", action)))
}

// lateAction is what happened to a call's late records: the late counter's action attribute.
type lateAction uint8

const (
	lateDropped lateAction = iota
	lateRouted
	latePassed // the processor hands every record on
	numLateActions
)

var lateActionNames = [numLateActions]string{lateDropped: "dropped", lateRouted: "routed", latePassed: "passed"}

// The options of the counters that every batch may touch, built once (see outcomeOption): by late
// reason and action, and by value reason.
var (
	lateOptions = func() (o [numVerdicts][numLateActions][]metric.AddOption) {
		for v := range o {
			for j, action := range lateActionNames {
				o[v][j] = []metric.AddOption{lateAttrs(stream.Verdict(v).String(), action)}
			}
		}
		return o
	}()
	valueReasonOptions = func() (o [numValueReasons][]metric.AddOption) {
		for i, reason := range valueReasonNames {
			o[i] = []metric.AddOption{reasonAttr(reason)}
		}
		return o
	}()
	weightReasonOptions = func() (o [numWeightReasons][]metric.AddOption) {
		for i, reason := range weightReasonNames {
			o[i] = []metric.AddOption{reasonAttr(reason)}
		}
		return o
	}()
)

// ottlErrorOptions are the attribute sets of an aggregation's OTTL errors, by clause.
func ottlErrorOptions(aggregation string) (o [numOTTLClauses][]metric.AddOption) {
	for c, clause := range ottlClauseNames {
		o[c] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("aggregation", aggregation), attribute.String("clause", clause)))}
	}
	return o
}

// pointOptions are the attribute sets of an aggregation's metric_points, by outcome, and of its
// other counters of metric inputs (its name alone).
func pointOptions(aggregation string) (o [numPointOutcomes][]metric.AddOption, agg []metric.AddOption) {
	for i, outcome := range pointOutcomeNames {
		o[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("aggregation", aggregation), attribute.String("outcome", outcome)))}
	}
	return o, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("aggregation", aggregation)))}
}

// incompatibleOptions are the attribute sets of an aggregation's incompatible_histograms, by reason.
func incompatibleOptions(aggregation string) (o [numHistogramFaults][]metric.AddOption) {
	for f, reason := range histogramFaultNames {
		o[f] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("aggregation", aggregation), attribute.String("reason", reason)))}
	}
	return o
}

func reasonAttr(reason string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason)))
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	b, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	return &telemetry{TelemetryBuilder: b, meter: metadata.Meter(set)}, nil
}

// observe registers the callback that reads the observable instruments from the shared state: one
// callback for all of them, so that the engine's Stats are read once per collection (the builder's
// Register...Callback would register one callback, and read Stats once, per instrument).
func (t *telemetry) observe(s *shared) error {
	reg, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.engine.Stats()
		o.ObserveInt64(t.WindowAggregatorWindowsFired, int64(st.WindowsFired))
		o.ObserveInt64(t.WindowAggregatorLateFirings, int64(st.LateFirings))
		o.ObserveInt64(t.WindowAggregatorOverflowRecords, int64(st.OverflowRecords))
		for i, a := range s.aggs {
			set := metric.WithAttributeSet(attribute.NewSet(attribute.String("aggregation", a.name)))
			o.ObserveInt64(t.WindowAggregatorActiveSeries, st.ActiveSeries[i], set)
			var ov int64
			if st.OverflowActive[i] {
				ov = 1
			}
			o.ObserveInt64(t.WindowAggregatorOverflowSeries, ov, set)
			if a.signal.points {
				o.ObserveInt64(t.WindowAggregatorInputStreams, int64(s.inputs.streams(i)), set)
			}
		}
		if st.Watermark != minWatermark {
			o.ObserveFloat64(t.WindowAggregatorWatermarkLag, float64(s.engine.Now()-st.Watermark)/1e9, heldByOptions[st.HeldBy])
		}
		if len(s.cfg.Watermark.PerSource) > 0 {
			o.ObserveInt64(t.WindowAggregatorWatermarkSources, int64(st.Sources))
		}
		o.ObserveInt64(t.WindowAggregatorPendingPoints, int64(s.emitter.Pending()))
		return nil
	}, t.WindowAggregatorActiveSeries, t.WindowAggregatorOverflowSeries, t.WindowAggregatorWatermarkLag, t.WindowAggregatorPendingPoints, t.WindowAggregatorWindowsFired, t.WindowAggregatorLateFirings, t.WindowAggregatorOverflowRecords, t.WindowAggregatorWatermarkSources, t.WindowAggregatorInputStreams)
	t.registration = reg
	return err
}

func (t *telemetry) shutdown() {
	if t.registration != nil {
		_ = t.registration.Unregister()
	}
	t.TelemetryBuilder.Shutdown()
}
