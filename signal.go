package windowaggregator

import (
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottldatapoint"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"go.opentelemetry.io/collector/component"
)

// A signal is one kind of record the component aggregates. The core (ingest.go) stages, applies and
// tallies the records of any signal, read through one view (record.go), and the instances of both
// forms are written once (instance.go); each signal has a file of its own (spans.go, logs.go,
// metrics.go) that holds its reader, which fills the view record by record, and its walk of its
// pdata. A new signal is such a file, and its description here.
type signal struct {
	name   string // the value of an aggregation's signal key
	input  int    // its index in signals, and in the per-signal tables of the state and the emitter
	record string // what one record is called: the unit of count ({span}, {log})
	// fields are the signal's special keys: fields of its records that group_by, where.attributes
	// and value: attribute:<key> name as if they were attributes (span.name, severity.text). The
	// view holds their values by index (record.field).
	fields []string
	// What of the configuration applies to it.
	duration      bool // value: duration (records with a start and an end)
	adjustedCount bool // weight: adjusted_count (records with a tracestate)
	exemplars     bool // exemplars (records with trace and span ids)
	kinds         bool // where.span_kind (records with a kind)
	// points: its records are metric data points (where.metric_names, no value key: see
	// metrics.go).
	points bool
	// ottl returns a parser of the signal's OTTL (its transform context, with path context names).
	ottl func(set component.TelemetrySettings) (ottlParser, error)
}

// The signals: what each one's records are, and what of the configuration applies to them.
var (
	spanSignal = &signal{
		name: "spans", input: inputSpans, record: "span", fields: []string{"span.name", "span.kind", "status.code"},
		duration: true, adjustedCount: true, exemplars: true, kinds: true,
		ottl: parserOf(ottlspan.NewParser, ottlspan.EnablePathContextNames),
	}
	logSignal = &signal{name: "logs", input: inputLogs, record: "log", fields: []string{"severity.text"},
		ottl: parserOf(ottllog.NewParser, ottllog.EnablePathContextNames)}
	metricSignal = &signal{name: "metrics", input: inputMetrics, record: "value", fields: []string{"metric.name"}, points: true,
		ottl: parserOf(ottldatapoint.NewParser, ottldatapoint.EnablePathContextNames)}
)

// The special keys of each signal, by index in its fields.
const (
	fieldSpanName = iota
	fieldSpanKind
	fieldStatusCode
)

const (
	fieldSeverityText = 0
	fieldMetricName   = 0
)

// The signals, by input. inputAny is the processor form in a metrics pipeline, which takes the
// results of every signal.
const (
	inputSpans = iota
	inputLogs
	inputMetrics
	numInputs
	inputAny = numInputs
)

var signals = [numInputs]*signal{inputSpans: spanSignal, inputLogs: logSignal, inputMetrics: metricSignal}

// newParser returns the signal's OTTL parser, with the standard converters.
func (sg *signal) newParser(set component.TelemetrySettings) (ottlParser, error) {
	if sg.ottl == nil {
		return nil, fmt.Errorf("%s take no OTTL", sg.name)
	}
	return sg.ottl(set)
}

// signalNamed returns the signal whose configuration name is name, or nil.
func signalNamed(name string) *signal {
	for _, sg := range signals {
		if sg.name == name {
			return sg
		}
	}
	return nil
}

// field returns the index of special key name among the signal's fields, or -1 for an attribute.
func (sg *signal) field(name string) int {
	for i, f := range sg.fields {
		if f == name {
			return i
		}
	}
	return -1
}

// fieldOwner returns the signal whose special key name is, if it is one of some signal's, else nil:
// configuration errors name it ("span.name applies to spans only").
func fieldOwner(name string) *signal {
	for _, sg := range signals {
		if sg.field(name) >= 0 {
			return sg
		}
	}
	return nil
}

// signalNames lists the signals' configuration names, for errors.
func signalNames() []string {
	out := make([]string, len(signals))
	for i, sg := range signals {
		out[i] = sg.name
	}
	return out
}
