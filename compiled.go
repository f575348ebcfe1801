package windowaggregator

import (
	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// aggregation is one configured aggregation, compiled for the hot path.
type aggregation struct {
	index   int // in the engine
	name    string
	signal  *signal // its input signal: which metrics outputs take its results
	kinds   uint8   // where.span_kind: bit per ptrace.SpanKind; 0: any
	where   []condition
	groupBy []keyRef
	// computed: some of what it reads is computed (OTTL) or defaulted, and takes the general path
	// (ingestRun.readComputed); the others read as plain aggregations always have. computedKeys
	// are then the group_by keys' expressions and defaults, by position.
	computed     bool
	computedKeys []computedKey
	// conditions are where.conditions: any one true selects a record; valueExpr is value: {ottl}
	conditions []ottlCondition
	valueExpr  ottlValue
	// metricNames are where.metric_names, for metrics; input is what it keeps of its input (see
	// internal/metricinput)
	metricNames []string
	input       *metricinput.Input
	// stampsInstance: its output resources carry the outputs' service.instance.id (shared.instance;
	// it does not group by that key)
	stampsInstance bool
	// value
	duration  bool    // the span duration, divided by unitScale
	unitScale float64 // nanoseconds per unit
	unit      string
	valueKey  keyRef // the numeric attribute, when not duration
	hasValue  bool
	weight    weightKind
	weightKey keyRef             // the weight attribute, with weighAttribute
	outputs   []delivery.Emitted // in table order
	histogram bool               // one of them is the histogram
	quantiles []float64
	histMax   int                // buckets per sign of the exponential histogram output
	bounds    []float64          // the explicit histogram output's bucket bounds, in the value's unit; nil: exponential
	point     metricinput.Target // what it asks of the metric points it takes
	// exemplars kept per pane and point: max_per_data_point for the histogram's points, 1 for the
	// max gauge alone; 0: none
	exemplars int
}

// keyRef is a group-by or where key, resolved once: a special key of the signal (field >= 0), or an
// attribute. (A group_by key computed by OTTL, or with a default, has those in the aggregation's
// computedKey, by position.)
type keyRef struct {
	name  string
	field int // index in the signal's fields; -1: an attribute
}

// computedKey is what a group_by key adds to keyRef: an OTTL expression that computes its value
// (nil: read as keyRef says), and its value for a record that lacks it (with hasDef).
type computedKey struct {
	expr   ottlValue
	def    pcommon.Value
	hasDef bool
}

func newKeyRef(name string, sg *signal) keyRef { return keyRef{name: name, field: sg.field(name)} }

// condition is one where.attributes equality.
type condition struct {
	key  keyRef
	want pcommon.Value
}

// feedsSketch reports whether the aggregation keeps a sketch (an exponential histogram output, or
// percentiles).
func (c *aggregation) feedsSketch() bool { return c.point.Sketch }

// fields returns the special keys of its signal that the aggregation reads (bit i: key i), to group
// by, to select, as its value or its weight.
func (c *aggregation) fields() uint32 {
	var f uint32
	read := func(k keyRef) {
		if k.field >= 0 {
			f |= 1 << k.field
		}
	}
	if c.hasValue && !c.duration {
		read(c.valueKey)
	}
	if c.weight == weighAttribute {
		read(c.weightKey)
	}
	for _, k := range c.groupBy {
		read(k)
	}
	for i := range c.where {
		read(c.where[i].key)
	}
	return f
}

// engineAggregation is what the engine keeps for this aggregation.
func (c *aggregation) engineAggregation(maxSeries int) stream.Aggregation {
	return stream.Aggregation{MaxSeries: maxSeries, Quantiles: c.quantiles, Histogram: c.histogram && c.bounds == nil, Bounds: c.bounds,
		Exemplars: c.exemplars}
}

// delivered describes the aggregation for delivery: what to build of its results, for which sinks.
func (c *aggregation) delivered() *delivery.Aggregation {
	keys := make([]string, len(c.groupBy))
	for i, k := range c.groupBy {
		keys[i] = k.name
	}
	return &delivery.Aggregation{Name: c.name, Input: c.signal.input, Record: c.signal.record, GroupBy: keys, Outputs: c.outputs,
		Bounds: c.bounds, HistMax: c.histMax, StampsInstance: c.stampsInstance, Unit: c.outputUnit, MonotonicSum: c.monotonicSum}
}

// outputUnit is the unit of its value outputs: a metrics aggregation's input's, else the configured
// one.
func (c *aggregation) outputUnit() string {
	if c.input != nil {
		return c.input.OutputUnit()
	}
	return c.unit
}

// monotonicSum reports whether its sum output is monotonic: for durations, and for the increases of
// monotonic sums.
func (c *aggregation) monotonicSum() bool {
	if c.input != nil {
		return c.input.MonotonicSum()
	}
	return c.duration
}

// signalAggs are the aggregations of one signal and what they read of its records: the signal's file
// reads only that.
type signalAggs struct {
	aggs []*aggregation
	// fields: bit i, some aggregation reads the signal's special key i
	fields uint32
	// ids: some keeps exemplars, for which the records' trace and span ids are read
	ids bool
	// weighs: some weighs records (weight other than none); adjusted: by their adjusted count, for
	// which spans' tracestates are read
	weighs, adjusted bool
	// kinds: some selects records by their kind (where.span_kind)
	kinds bool
	// byName: for metrics, the aggregations that take the points of each metric name
	byName map[string][]*aggregation
}

func (sa *signalAggs) add(a *aggregation) {
	sa.aggs = append(sa.aggs, a)
	sa.fields |= a.fields()
	sa.ids = sa.ids || a.exemplars > 0
	sa.weighs = sa.weighs || a.weight != weighNone
	sa.adjusted = sa.adjusted || a.weight == weighAdjustedCount
	sa.kinds = sa.kinds || a.kinds != 0
	for _, name := range a.metricNames {
		if sa.byName == nil {
			sa.byName = map[string][]*aggregation{}
		}
		sa.byName[name] = append(sa.byName[name], a)
	}
}

// reads reports whether some aggregation reads special key i.
func (sa *signalAggs) reads(i int) bool { return sa.fields&(1<<i) != 0 }
