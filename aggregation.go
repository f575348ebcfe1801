package windowaggregator

import (
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/metric"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/processor/stream"
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
	// ottlErrorOptions are the attributes its OTTL errors are counted with, by clause
	ottlErrorOptions [numOTTLClauses][]metric.AddOption
	// metricNames are where.metric_names, for metrics; pointOptions the attributes its metric_points
	// are counted with, by outcome, incompatibleOptions its incompatible_histograms, by reason, and
	// aggregationOption its name alone
	metricNames         []string
	input               *pointInput // for metrics, what it keeps of its input (see metricInputs)
	pointOptions        [numPointOutcomes][]metric.AddOption
	aggregationOption   []metric.AddOption
	incompatibleOptions [numHistogramFaults][]metric.AddOption
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
	quantiles []float64
	histMax   int       // buckets per sign of the exponential histogram output
	bounds    []float64 // the explicit histogram output's bucket bounds, in the value's unit; nil: exponential
	// exemplars kept per pane and point: max_per_data_point for the histogram's points, 1 for the
	// max gauge alone; 0: none
	exemplars int
}

// compileAggregation compiles aggregation a, the index-th, its OTTL with a parser of telemetry set.
func compileAggregation(index int, a AggregationConfig, set component.TelemetrySettings) (*aggregation, error) {
	sg := signalNamed(a.Signal)
	c := &aggregation{index: index, name: a.Name, signal: sg, histMax: defaultHistogramMaxSize}
	c.ottlErrorOptions = ottlErrorOptions(a.Name)
	c.pointOptions, c.aggregationOption = pointOptions(a.Name)
	c.incompatibleOptions = incompatibleOptions(a.Name)
	var parser ottlParser // made for the first expression
	parse := func(what string, p func(ottlParser) error) error {
		if parser == nil {
			var err error
			if parser, err = sg.newParser(set); err != nil {
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
		c.unit = a.Unit
		if c.unit == "" {
			c.unit = "ms"
		}
		c.unitScale = unitScale[c.unit]
	case strings.HasPrefix(a.Value.Source, valueAttributePrefix):
		c.valueKey = newKeyRef(strings.TrimPrefix(a.Value.Source, valueAttributePrefix), sg)
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
	case strings.HasPrefix(w, valueAttributePrefix):
		c.weight, c.weightKey = weighAttribute, newKeyRef(strings.TrimPrefix(w, valueAttributePrefix), sg)
	}
	var err error
	if c.outputs, c.quantiles, err = delivery.Compile(a.outputs()); err != nil {
		return nil, fmt.Errorf("aggregation %q: %w", a.Name, err)
	}
	if h := a.Histogram; h != nil && h.Explicit != nil {
		if c.bounds, err = a.bucketBounds(c.unitScale); err != nil {
			return nil, fmt.Errorf("aggregation %q: histogram.explicit.buckets: %w", a.Name, err)
		}
	}
	if c.exemplars = a.Exemplars.perPoint(); c.exemplars > 0 && !c.hasOutput(delivery.Histogram) {
		c.exemplars = 1 // the max gauge's alone
	}
	return c, nil
}

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
	hist := c.hasOutput(delivery.Histogram)
	return stream.Aggregation{MaxSeries: maxSeries, Quantiles: c.quantiles, Histogram: hist && c.bounds == nil, Bounds: c.bounds,
		Exemplars: c.exemplars}
}

// hasOutput reports whether the aggregation emits the output named name (a row's name).
func (c *aggregation) hasOutput(name string) bool { return delivery.Has(c.outputs, name) }

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
		return c.input.outputUnit()
	}
	return c.unit
}

// monotonicSum reports whether its sum output is monotonic: for durations, and for the increases of
// monotonic sums.
func (c *aggregation) monotonicSum() bool {
	if c.input != nil {
		return c.input.monotonicSum()
	}
	return c.duration
}
