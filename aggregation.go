package windowaggregator

import (
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
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

// compileAggregation compiles aggregation a, the index-th, its OTTL by parsers.
func compileAggregation(index int, a AggregationConfig, parsers *ottlParsers) (*aggregation, error) {
	sg := signalNamed(string(a.Signal))
	c := &aggregation{index: index, name: a.Name, signal: sg, histMax: defaultHistogramMaxSize}
	var parser ottlParser // taken for the first expression
	parse := func(what string, p func(ottlParser) error) error {
		if parser == nil {
			var err error
			if parser, err = parsers.parser(sg.name, sg.newParser); err != nil {
				return fmt.Errorf("aggregation %q: %s: %w", a.Name, what, err)
			}
		}
		if err := p(parser); err != nil {
			return fmt.Errorf("aggregation %q: %s: %w", a.Name, what, err)
		}
		return nil
	}
	if h := a.Histogram; h != nil && h.Exponential != nil && h.Exponential.MaxSize != 0 {
		c.histMax = h.Exponential.MaxSize
	}
	if a.Where != nil {
		c.metricNames = a.Where.MetricNames
		for _, k := range a.Where.SpanKind {
			c.kinds |= 1 << spanKindByConfig[k]
		}
		for k, v := range a.Where.Attributes {
			want := pcommon.NewValueEmpty()
			if err := want.FromRaw(v); err != nil {
				return nil, fmt.Errorf("aggregation %q: where.attributes.%s: %w", a.Name, k, err)
			}
			c.where = append(c.where, condition{key: newKeyRef(k, sg), want: want})
		}
		for i, expr := range a.Where.Conditions {
			if err := parse(fmt.Sprintf("where.conditions[%d]", i), func(p ottlParser) error {
				cond, err := p.condition(expr)
				c.conditions = append(c.conditions, cond)
				return err
			}); err != nil {
				return nil, err
			}
		}
	}
	c.computedKeys = make([]computedKey, len(a.GroupBy))
	for i, k := range a.GroupBy {
		ref, ck := newKeyRef(k.Key, sg), &c.computedKeys[i]
		if k.OTTL != "" {
			ref.field = -1 // computed: never the record's field of that name
			if err := parse(fmt.Sprintf("group_by[%d]", i), func(p ottlParser) (err error) {
				ck.expr, err = p.value(k.OTTL)
				return err
			}); err != nil {
				return nil, err
			}
		}
		if k.Default != nil {
			ck.def, ck.hasDef = pcommon.NewValueEmpty(), true
			if err := ck.def.FromRaw(k.Default); err != nil {
				return nil, fmt.Errorf("aggregation %q: group_by[%d].default: %w", a.Name, i, err)
			}
		}
		c.computed = c.computed || ck.expr != nil || ck.hasDef
		c.groupBy = append(c.groupBy, ref)
	}
	c.stampsInstance = !slices.ContainsFunc(c.groupBy, func(k keyRef) bool { return k.name == delivery.InstanceKey })
	switch {
	case a.isDuration():
		c.duration, c.hasValue = true, true
		unit := a.Unit
		if unit == "" {
			unit = "ms"
		}
		c.unit, c.unitScale = string(unit), unitScale[unit]
	case isAttribute(a.Value.Source):
		key, _ := attributeKey(a.Value.Source)
		c.valueKey = newKeyRef(key, sg)
		c.hasValue = true
	case a.Value.OTTL != "":
		if err := parse("value", func(p ottlParser) (err error) {
			c.valueExpr, err = p.value(a.Value.OTTL)
			return err
		}); err != nil {
			return nil, err
		}
		c.hasValue = true
	}
	c.computed = c.computed || len(c.conditions) > 0 || c.valueExpr != nil
	switch w := a.weight(); {
	case w == weightAdjustedCountName:
		c.weight = weighAdjustedCount
	case isAttribute(string(w)):
		key, _ := attributeKey(string(w))
		c.weight, c.weightKey = weighAttribute, newKeyRef(key, sg)
	}
	var err error
	if c.outputs, c.quantiles, err = delivery.Compile(a.outputs()); err != nil {
		return nil, fmt.Errorf("aggregation %q: %w", a.Name, err)
	}
	c.histogram = delivery.Has(c.outputs, delivery.Histogram)
	if h := a.Histogram; h != nil && h.Explicit != nil {
		if c.bounds, err = a.bucketBounds(c.unitScale); err != nil {
			return nil, fmt.Errorf("aggregation %q: histogram.explicit.buckets: %w", a.Name, err)
		}
	}
	if c.exemplars = a.Exemplars.perPoint(); c.exemplars > 0 && !c.histogram {
		c.exemplars = 1 // the max gauge's alone
	}
	c.point = metricinput.Target{Index: c.index, Histogram: c.histogram, Quantiles: len(c.quantiles) > 0, Bounds: c.bounds,
		Sketch: len(c.quantiles) > 0 || c.bounds == nil && c.histogram}
	return c, nil
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
