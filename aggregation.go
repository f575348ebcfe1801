package windowaggregator

import (
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

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
