package ingest

import (
	"slices"
	"strconv"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Aggregation is one configured aggregation, compiled for the hot path.
type Aggregation struct {
	Index   int // in the engine
	Name    string
	Signal  *Signal // its input signal: which metrics outputs take its results
	Kinds   uint8   // where.span_kind: bit per ptrace.SpanKind; 0: any
	Where   []Condition
	GroupBy []KeyRef
	// Computed: some of what it reads is computed (OTTL) or defaulted, and takes the general path
	// (ingestRun.readComputed); the others read as plain aggregations always have. ComputedKeys
	// are then the group_by keys' expressions and defaults, by position.
	Computed     bool
	ComputedKeys []ComputedKey
	// Conditions are where.conditions: any one true selects a record; ValueExpr is value: {ottl}
	Conditions []OTTLCondition
	ValueExpr  OTTLValue
	// MetricNames are where.metric_names, for metrics; input is what it keeps of its input (see
	// internal/metricinput)
	MetricNames []string
	Input       *metricinput.Input
	// StampsInstance: its output resources carry the outputs' service.instance.id (the emitter's;
	// it does not group by that key)
	StampsInstance bool
	// value
	Duration  bool    // the span duration, divided by UnitScale
	UnitScale float64 // nanoseconds per unit
	Unit      string
	ValueKey  KeyRef // the numeric attribute, when not duration
	HasValue  bool
	Weight    weightKind
	WeightKey KeyRef             // the weight attribute, with WeighAttribute
	Outputs   []delivery.Emitted // in table order
	Histogram bool               // one of them is the histogram
	Quantiles []float64
	HistMax   int                // buckets per sign of the exponential histogram output
	Bounds    []float64          // the explicit histogram output's bucket bounds, in the value's unit; nil: exponential
	Point     metricinput.Target // what it asks of the metric points it takes
	// Exemplars kept per pane and point: max_per_data_point for the histogram's points, 1 for the
	// max gauge alone; 0: none
	Exemplars int
	// Accumulators are what the engine keeps for the outputs that have an accumulator (stddev,
	// stdvar, distinct); Distinct are the keys of the distinct outputs, by identifier index
	// (stream.Record.IDs): the trace id (Field FieldTraceID), a special key or an attribute.
	Accumulators []stream.AccumulatorKind
	Distinct     []KeyRef
}

// KeyRef is a group-by or where key, resolved once: a special key of the signal (field >= 0), or an
// attribute. (A group_by key computed by OTTL, or with a default, has those in the aggregation's
// ComputedKey, by position.)
type KeyRef struct {
	Name  string
	Field int // index in the signal's fields; -1: an attribute
}

// ComputedKey is what a group_by key adds to KeyRef: an OTTL expression that computes its value
// (nil: read as KeyRef says), and its value for a record that lacks it (with HasDef).
type ComputedKey struct {
	Expr   OTTLValue
	Def    pcommon.Value
	HasDef bool
}

func NewKeyRef(name string, sg *Signal) KeyRef { return KeyRef{Name: name, Field: sg.Field(name)} }

// TraceIDKey names the record's trace id in a distinct:<key> output (spans and logs).
const TraceIDKey = "trace_id"

// FieldTraceID is the Field of a KeyRef to the record's trace id.
const FieldTraceID = -2

// NewDistinctKeyRef resolves the key of a distinct:<key> output: the trace id, or as a group_by key.
func NewDistinctKeyRef(name string, sg *Signal) KeyRef {
	if name == TraceIDKey {
		return KeyRef{Name: name, Field: FieldTraceID}
	}
	return NewKeyRef(name, sg)
}

// Condition is one where.attributes equality.
type Condition struct {
	Key  KeyRef
	Want pcommon.Value
}

// FeedsSketch reports whether the aggregation keeps a sketch (an exponential histogram output, or
// percentiles).
func (c *Aggregation) FeedsSketch() bool { return c.Point.Sketch }

// fields returns the special keys of its signal that the aggregation reads (bit i: key i), to group
// by, to select, as its value or its weight.
func (c *Aggregation) fields() uint32 {
	var f uint32
	read := func(k KeyRef) {
		if k.Field >= 0 {
			f |= 1 << k.Field
		}
	}
	if c.HasValue && !c.Duration {
		read(c.ValueKey)
	}
	if c.Weight == WeighAttribute {
		read(c.WeightKey)
	}
	for _, k := range c.GroupBy {
		read(k)
	}
	for i := range c.Where {
		read(c.Where[i].Key)
	}
	for _, k := range c.Distinct {
		read(k)
	}
	return f
}

// EngineAggregation is what the engine keeps for this aggregation.
func (c *Aggregation) EngineAggregation(maxSeries int) stream.Aggregation {
	return stream.Aggregation{MaxSeries: maxSeries, Quantiles: c.Quantiles, Histogram: c.Histogram && c.Bounds == nil, Bounds: c.Bounds,
		Exemplars: c.Exemplars, Accumulators: c.Accumulators}
}

// Delivered describes the aggregation for delivery: what to build of its results, for which sinks.
func (c *Aggregation) Delivered() *delivery.Aggregation {
	return &delivery.Aggregation{Name: c.Name, Input: c.Signal.Input, Record: c.Signal.record, GroupBy: c.GroupByNames(), Outputs: c.Outputs,
		Bounds: c.Bounds, HistMax: c.HistMax, StampsInstance: c.StampsInstance, Unit: c.outputUnit, MonotonicSum: c.monotonicSum}
}

// outputUnit is the unit of its value outputs: a metrics aggregation's input's, else the configured
// one.
func (c *Aggregation) outputUnit() string {
	if c.Input != nil {
		return c.Input.OutputUnit()
	}
	return c.Unit
}

// monotonicSum reports whether its sum output is monotonic: for durations, and for the increases of
// monotonic sums.
func (c *Aggregation) monotonicSum() bool {
	if c.Input != nil {
		return c.Input.MonotonicSum()
	}
	return c.Duration
}

// SignalAggs are the aggregations of one signal and what they read of its records: the signal's file
// reads only that.
type SignalAggs struct {
	aggs []*Aggregation
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
	byName map[string][]*Aggregation
}

func (sa *SignalAggs) Add(a *Aggregation) {
	sa.aggs = append(sa.aggs, a)
	sa.fields |= a.fields()
	sa.ids = sa.ids || a.Exemplars > 0 || slices.ContainsFunc(a.Distinct, func(k KeyRef) bool { return k.Field == FieldTraceID })
	sa.weighs = sa.weighs || a.Weight != WeighNone
	sa.adjusted = sa.adjusted || a.Weight == WeighAdjustedCount
	sa.kinds = sa.kinds || a.Kinds != 0
	for _, name := range a.MetricNames {
		if sa.byName == nil {
			sa.byName = map[string][]*Aggregation{}
		}
		sa.byName[name] = append(sa.byName[name], a)
	}
}

// reads reports whether some aggregation reads special key i.
func (sa *SignalAggs) reads(i int) bool { return sa.fields&(1<<i) != 0 }

// GroupsBy reports whether the aggregation groups by key name.
func (a *Aggregation) GroupsBy(name string) bool {
	for _, k := range a.GroupBy {
		if k.Name == name {
			return true
		}
	}
	return false
}

// DecodeKey reads a series key as the aggregation's group_by values, each as text; a key the
// record lacked is left out.
func (a *Aggregation) DecodeKey(key string) map[string]string {
	out := make(map[string]string, len(a.GroupBy))
	_ = serieskey.Decode(key, func(i int, v serieskey.Value) {
		if i >= len(a.GroupBy) {
			return
		}
		name := a.GroupBy[i].Name
		switch v.Kind {
		case serieskey.Str, serieskey.Bytes:
			out[name] = v.Str
		case serieskey.Int:
			out[name] = strconv.FormatInt(v.Int, 10)
		case serieskey.Double:
			out[name] = strconv.FormatFloat(v.Double, 'g', -1, 64)
		case serieskey.Bool:
			out[name] = strconv.FormatBool(v.Bool)
		}
	})
	return out
}

// GroupByNames are the aggregation's group_by keys.
func (a *Aggregation) GroupByNames() []string {
	names := make([]string, len(a.GroupBy))
	for i, k := range a.GroupBy {
		names[i] = k.Name
	}
	return names
}
