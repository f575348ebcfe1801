package ingest

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metadata"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// Telemetry is the component's self-telemetry: the instruments declared in metadata.yaml
// (telemetry:) and made by the generated TelemetryBuilder (internal/metadata, `make generate`), the
// attribute sets of each aggregation's counters, and the one callback that observes the state's
// gauges (the component's observe). The names are listed in the README.
type Telemetry struct {
	*metadata.TelemetryBuilder
	Meter        metric.Meter // the builder's meter, for the one callback of observe
	Registration metric.Registration
	byAgg        []*aggOptions // by aggregation index
}

// Outcome attribute values, as option lists: passing a list with ... reuses it, where passing one
// option builds a new list per call (an allocation per batch).
var (
	attrOutcomeAggregated  = outcomeOption("aggregated")
	attrOutcomeLateUpdated = outcomeOption("late_updated")
	attrOutcomeLate        = outcomeOption("late")
	attrOutcomeUnmatched   = outcomeOption("unmatched")
)

// signalOptions are the dedup counters' attribute sets, by input signal.
var signalOptions = func() (o [NumInputs][]metric.AddOption) {
	for input, sg := range Signals {
		o[input] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", sg.Name)))}
	}
	return o
}()

// attrReasonAheadOfClock is the clock-skew counter's one reason.
var attrReasonAheadOfClock = []metric.AddOption{ReasonAttr("ahead_of_clock")}

// HeldByOptions are the watermark lag's attribute sets, by what holds W back.
var HeldByOptions = func() (o []metric.ObserveOption) {
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

// The options of the counters that every batch may touch, built once (see outcomeOption): by late
// reason and action, and by value reason.
var (
	lateOptions = func() (o [numVerdicts][NumLateActions][]metric.AddOption) {
		for v := range o {
			for j, action := range LateActionNames {
				o[v][j] = []metric.AddOption{lateAttrs(stream.Verdict(v).String(), action)}
			}
		}
		return o
	}()
	valueReasonOptions = func() (o [values.NumReasons][]metric.AddOption) {
		for i, reason := range values.Names {
			o[i] = []metric.AddOption{ReasonAttr(reason)}
		}
		return o
	}()
	weightReasonOptions = func() (o [NumWeightReasons][]metric.AddOption) {
		for i, reason := range weightReasonNames {
			o[i] = []metric.AddOption{ReasonAttr(reason)}
		}
		return o
	}()
)

// aggOptions are the attribute sets of one aggregation's counters: its name alone, and by OTTL clause,
// metric point outcome and incompatible histogram's reason.
type aggOptions struct {
	name         []metric.AddOption
	ottl         [NumOTTLClauses][]metric.AddOption
	points       [metricinput.NumOutcomes][]metric.AddOption
	incompatible [metricinput.NumFaults][]metric.AddOption
}

func newAggOptions(aggregation string) *aggOptions {
	with := func(k, v string) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("aggregation", aggregation), attribute.String(k, v)))}
	}
	o := &aggOptions{name: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("aggregation", aggregation)))}}
	for c, clause := range OTTLClauseNames {
		o.ottl[c] = with("clause", clause)
	}
	for i, outcome := range metricinput.OutcomeNames {
		o.points[i] = with("outcome", outcome)
	}
	for f, reason := range metricinput.FaultNames {
		o.incompatible[f] = with("reason", reason)
	}
	return o
}

// ReasonAttr is the attribute set of a counter's reason.
func ReasonAttr(reason string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reason)))
}

// NewTelemetry makes the instruments, and the attribute sets of the aggregations named aggs.
func NewTelemetry(set component.TelemetrySettings, aggs []string) (*Telemetry, error) {
	b, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{TelemetryBuilder: b, Meter: metadata.Meter(set)}
	for _, name := range aggs {
		t.byAgg = append(t.byAgg, newAggOptions(name))
	}
	return t, nil
}

// Shutdown lets the instruments and the observe callback go.
func (t *Telemetry) Shutdown() {
	if t.Registration != nil {
		_ = t.Registration.Unregister()
	}
	t.TelemetryBuilder.Shutdown()
}
