package ingest

import (
	"fmt"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottldatapoint"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"go.opentelemetry.io/collector/component"
)

// A Signal is one kind of record the component aggregates. The core (ingest.go) stages, applies and
// tallies the records of any signal, read through one view (record.go); each signal has a file of
// its own (spans.go, logs.go, metrics.go) that holds its reader, which fills the view record by
// record, and its walk of its pdata. A new signal is such a file, its description here, and its
// instances under its pdata names in the component's forms.go.
type Signal struct {
	Name   string // the value of an aggregation's signal key
	Input  int    // its index in signals, and in the per-signal tables of the state and the emitter
	record string // what one record is called: the unit of count ({span}, {log})
	// fields are the signal's special keys: fields of its records that group_by, where.attributes
	// and value: attribute:<key> name as if they were attributes (span.name, severity.text). The
	// view holds their values by index (record.field).
	fields []string
	// What of the configuration applies to it.
	Duration      bool // value: duration (records with a start and an end)
	AdjustedCount bool // weight: adjusted_count (records with a tracestate)
	Exemplars     bool // exemplars (records with trace and span ids)
	Kinds         bool // where.span_kind (records with a kind)
	// Points: its records are metric data points (where.metric_names, no value key: see
	// metrics.go).
	Points bool
	// OTTL returns a parser of the signal's OTTL (its transform context, with path context names).
	OTTL func(set component.TelemetrySettings) (OTTLParser, error)
}

// The signals: what each one's records are, and what of the configuration applies to them.
var (
	SpanSignal = &Signal{
		Name: "spans", Input: InputSpans, record: "span", fields: []string{"span.name", "span.kind", "status.code"},
		Duration: true, AdjustedCount: true, Exemplars: true, Kinds: true,
		OTTL: parserOf(ottlspan.NewParser, ottlspan.EnablePathContextNames),
	}
	LogSignal = &Signal{Name: "logs", Input: InputLogs, record: "log", fields: []string{"severity.text"},
		OTTL: parserOf(ottllog.NewParser, ottllog.EnablePathContextNames)}
	metricSignal = &Signal{Name: "metrics", Input: InputMetrics, record: "value", fields: []string{"metric.name"}, Points: true,
		OTTL: parserOf(ottldatapoint.NewParser, ottldatapoint.EnablePathContextNames)}
)

// The special keys of each signal, by index in its fields.
const (
	FieldSpanName = iota
	fieldSpanKind
	fieldStatusCode
)

const (
	fieldSeverityText = 0
	fieldMetricName   = 0
)

// The signals, by input. InputAny is the processor form in a metrics pipeline, which takes the
// results of every signal.
const (
	InputSpans = iota
	InputLogs
	InputMetrics
	NumInputs
	InputAny = NumInputs
)

var Signals = [NumInputs]*Signal{InputSpans: SpanSignal, InputLogs: LogSignal, InputMetrics: metricSignal}

// NewParser returns the signal's OTTL parser, with the standard converters.
func (sg *Signal) NewParser(set component.TelemetrySettings) (OTTLParser, error) {
	if sg.OTTL == nil {
		return nil, fmt.Errorf("%s take no OTTL", sg.Name)
	}
	return sg.OTTL(set)
}

// SignalNamed returns the signal whose configuration name is name, or nil.
func SignalNamed(name string) *Signal {
	for _, sg := range Signals {
		if sg.Name == name {
			return sg
		}
	}
	return nil
}

// Field returns the index of special key name among the signal's fields, or -1 for an attribute.
func (sg *Signal) Field(name string) int {
	for i, f := range sg.fields {
		if f == name {
			return i
		}
	}
	return -1
}

// FieldOwner returns the signal whose special key name is, if it is one of some signal's, else nil:
// configuration errors name it ("span.name applies to spans only").
func FieldOwner(name string) *Signal {
	for _, sg := range Signals {
		if sg.Field(name) >= 0 {
			return sg
		}
	}
	return nil
}

// SignalNames lists the signals' configuration names, for errors.
func SignalNames() []string {
	out := make([]string, len(Signals))
	for i, sg := range Signals {
		out[i] = sg.Name
	}
	return out
}
