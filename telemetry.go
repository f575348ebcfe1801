package windowaggregator

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// telemetry is the component's self-telemetry, made through the component's MeterProvider. The names
// are listed in the README.
type telemetry struct {
	records         metric.Int64Counter           // records by outcome
	late            metric.Int64Counter           // late, future and invalid records by reason and action
	valuesMissing   metric.Int64Counter           // records counted without a value, by reason
	overflowRecords metric.Int64ObservableCounter // the engine's own counters, read at collection
	truncatedKeys   metric.Int64Counter           // records whose group-by value was cut to maxKeyValueLen
	clockSkew       metric.Int64Counter           // records stamped ahead of the collector's clock, by reason
	sharedSource    metric.Int64Counter           // records of sources past watermark.max_sources
	sources         metric.Int64ObservableGauge   // sources held with watermark.per_source
	windowsFired    metric.Int64ObservableCounter
	lateFirings     metric.Int64ObservableCounter
	emitFailures    metric.Int64Counter // failed sends by kind: retryable, permanent
	pointsDropped   metric.Int64Counter // result data points dropped, by reason
	checkpoints     metric.Int64Counter // checkpoint outcomes
	activeSeries    metric.Int64ObservableGauge
	overflowActive  metric.Int64ObservableGauge
	watermarkLag    metric.Float64ObservableGauge
	pendingBatches  metric.Int64ObservableGauge
	registration    metric.Registration
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
	lateOptions = func() (o [numLate][numLateActions][]metric.AddOption) {
		for i, reason := range lateReasons {
			for j, action := range lateActionNames {
				o[i][j] = []metric.AddOption{lateAttrs(reason, action)}
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
)

func reasonAttr(reason string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason)))
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	m := mp.Meter("github.com/windowaggregator/windowaggregator")
	t := &telemetry{}
	var err, e error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	t.records = counter("otelcol_window_aggregator_records", "{record}", "Records seen, by outcome: aggregated (on time), late_updated (added within allowed_lateness), late (expired, future or invalid), unmatched (no aggregation selects them).")
	t.late = counter("otelcol_window_aggregator_late_records", "{record}", "Records not aggregated, by reason (expired, future, invalid) and action (routed, dropped, passed).")
	t.valuesMissing = counter("otelcol_window_aggregator_values_missing", "{record}", "Records counted without a value, by reason (missing, not_numeric, not_finite, end_before_start).")
	observed := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, e := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	t.overflowRecords = observed("otelcol_window_aggregator_overflow_records", "{record}", "Record aggregations that went to an overflow series because max_series was reached.")
	t.truncatedKeys = counter("otelcol_window_aggregator_truncated_keys", "{record}", "Record aggregations whose group-by value was longer than 4096 bytes and was cut to that length.")
	t.clockSkew = counter("otelcol_window_aggregator_clock_skew_records", "{record}", "Records stamped ahead of the collector's clock (within max_future_skew), by reason (ahead_of_clock): aggregated, but the watermark does not follow them past the clock.")
	t.sharedSource = counter("otelcol_window_aggregator_shared_source_records", "{record}", "Records of sources past watermark.max_sources, which share one source's watermark.")
	t.windowsFired = observed("otelcol_window_aggregator_windows_fired", "{window}", "Window results emitted (first firings), one per series and window.")
	t.lateFirings = observed("otelcol_window_aggregator_late_firings", "{window}", "Late firings: windows emitted again after records arrived within allowed_lateness.")
	t.emitFailures = counter("otelcol_window_aggregator_emit_failures", "{request}", "Sends of results to the metrics consumer that failed, by kind (retryable, permanent).")
	t.pointsDropped = counter("otelcol_window_aggregator_dropped_points", "{datapoint}", "Result data points dropped, by reason (permanent_error, queue_full, shutdown).")
	t.checkpoints = counter("otelcol_window_aggregator_checkpoints", "{checkpoint}", "Checkpoints to and restores from storage, by outcome (saved, save_failed, restored, restore_failed, empty).")
	t.activeSeries, e = m.Int64ObservableGauge("otelcol_window_aggregator_active_series", metric.WithUnit("{series}"), metric.WithDescription("Series held in open windows, per aggregation."))
	err = errors.Join(err, e)
	t.overflowActive, e = m.Int64ObservableGauge("otelcol_window_aggregator_overflow_series", metric.WithUnit("{series}"), metric.WithDescription("1 while an aggregation's overflow series holds data."))
	err = errors.Join(err, e)
	t.watermarkLag, e = m.Float64ObservableGauge("otelcol_window_aggregator_watermark_lag", metric.WithUnit("s"), metric.WithDescription("Wall clock minus watermark, by what holds the watermark back (held_by: records, source, clock, idle)."))
	err = errors.Join(err, e)
	t.sources, e = m.Int64ObservableGauge("otelcol_window_aggregator_watermark_sources", metric.WithUnit("{source}"), metric.WithDescription("Sources whose watermarks are held, with watermark.per_source."))
	err = errors.Join(err, e)
	t.pendingBatches, e = m.Int64ObservableGauge("otelcol_window_aggregator_pending_batches", metric.WithUnit("{batch}"), metric.WithDescription("Result batches kept for retry after the metrics consumer failed."))
	err = errors.Join(err, e)
	return t, err
}

// observe registers the callback that reads the gauges from the shared state.
func (t *telemetry) observe(mp metric.MeterProvider, s *shared) error {
	m := mp.Meter("github.com/windowaggregator/windowaggregator")
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.engine.Stats()
		o.ObserveInt64(t.windowsFired, int64(st.WindowsFired))
		o.ObserveInt64(t.lateFirings, int64(st.LateFirings))
		o.ObserveInt64(t.overflowRecords, int64(st.OverflowRecords))
		for i, a := range s.aggs {
			set := metric.WithAttributeSet(attribute.NewSet(attribute.String("aggregation", a.name)))
			o.ObserveInt64(t.activeSeries, st.ActiveSeries[i], set)
			var ov int64
			if st.OverflowActive[i] {
				ov = 1
			}
			o.ObserveInt64(t.overflowActive, ov, set)
		}
		if st.Watermark != minWatermark {
			o.ObserveFloat64(t.watermarkLag, float64(s.engine.Now()-st.Watermark)/1e9, heldByOptions[st.HeldBy])
		}
		if len(s.cfg.Watermark.PerSource) > 0 {
			o.ObserveInt64(t.sources, int64(st.Sources))
		}
		o.ObserveInt64(t.pendingBatches, int64(s.emitter.pendingBatches()))
		return nil
	}, t.activeSeries, t.overflowActive, t.watermarkLag, t.pendingBatches, t.windowsFired, t.lateFirings, t.overflowRecords, t.sources)
	t.registration = reg
	return err
}

func (t *telemetry) shutdown() {
	if t.registration != nil {
		_ = t.registration.Unregister()
	}
}
