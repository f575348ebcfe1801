package windowaggregator

import (
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

// compileAggregation compiles aggregation a, the index-th, its OTTL by parsers.
func compileAggregation(index int, a AggregationConfig, parsers *ingest.OTTLParsers) (*ingest.Aggregation, error) {
	sg := ingest.SignalNamed(string(a.Signal))
	c := &ingest.Aggregation{Index: index, Name: a.Name, Signal: sg, HistMax: defaultHistogramMaxSize}
	var parser ingest.OTTLParser // taken for the first expression
	parse := func(what string, p func(ingest.OTTLParser) error) error {
		if parser == nil {
			var err error
			if parser, err = parsers.Parser(sg.Name, sg.NewParser); err != nil {
				return fmt.Errorf("aggregation %q: %s: %w", a.Name, what, err)
			}
		}
		if err := p(parser); err != nil {
			return fmt.Errorf("aggregation %q: %s: %w", a.Name, what, err)
		}
		return nil
	}
	if h := a.Histogram; h != nil && h.Exponential != nil && h.Exponential.MaxSize != 0 {
		c.HistMax = h.Exponential.MaxSize
	}
	if a.Where != nil {
		c.MetricNames = a.Where.MetricNames
		for _, k := range a.Where.SpanKind {
			c.Kinds |= 1 << spanKindByConfig[k]
		}
		for k, v := range a.Where.Attributes {
			want := pcommon.NewValueEmpty()
			if err := want.FromRaw(v); err != nil {
				return nil, fmt.Errorf("aggregation %q: where.attributes.%s: %w", a.Name, k, err)
			}
			c.Where = append(c.Where, ingest.Condition{Key: ingest.NewKeyRef(k, sg), Want: want})
		}
		for i, expr := range a.Where.Conditions {
			if err := parse(fmt.Sprintf("where.conditions[%d]", i), func(p ingest.OTTLParser) error {
				cond, err := p.Condition(expr)
				c.Conditions = append(c.Conditions, cond)
				return err
			}); err != nil {
				return nil, err
			}
		}
	}
	c.ComputedKeys = make([]ingest.ComputedKey, len(a.GroupBy))
	for i, k := range a.GroupBy {
		ref, ck := ingest.NewKeyRef(k.Key, sg), &c.ComputedKeys[i]
		if k.OTTL != "" {
			ref.Field = -1 // computed: never the record's field of that name
			if err := parse(fmt.Sprintf("group_by[%d]", i), func(p ingest.OTTLParser) (err error) {
				ck.Expr, err = p.Value(k.OTTL)
				return err
			}); err != nil {
				return nil, err
			}
		}
		if k.Default != nil {
			ck.Def, ck.HasDef = pcommon.NewValueEmpty(), true
			if err := ck.Def.FromRaw(k.Default); err != nil {
				return nil, fmt.Errorf("aggregation %q: group_by[%d].default: %w", a.Name, i, err)
			}
		}
		c.Computed = c.Computed || ck.Expr != nil || ck.HasDef
		c.GroupBy = append(c.GroupBy, ref)
	}
	c.StampsInstance = !slices.ContainsFunc(c.GroupBy, func(k ingest.KeyRef) bool { return k.Name == delivery.InstanceKey })
	switch {
	case a.isDuration():
		c.Duration, c.HasValue = true, true
		unit := a.Unit
		if unit == "" {
			unit = "ms"
		}
		c.Unit, c.UnitScale = string(unit), unitScale[unit]
	case isAttribute(a.Value.Source):
		key, _ := attributeKey(a.Value.Source)
		c.ValueKey = ingest.NewKeyRef(key, sg)
		c.HasValue = true
	case a.Value.OTTL != "":
		if err := parse("value", func(p ingest.OTTLParser) (err error) {
			c.ValueExpr, err = p.Value(a.Value.OTTL)
			return err
		}); err != nil {
			return nil, err
		}
		c.HasValue = true
	}
	c.Computed = c.Computed || len(c.Conditions) > 0 || c.ValueExpr != nil
	switch w := a.weight(); {
	case w == weightAdjustedCountName:
		c.Weight = ingest.WeighAdjustedCount
	case isAttribute(string(w)):
		key, _ := attributeKey(string(w))
		c.Weight, c.WeightKey = ingest.WeighAttribute, ingest.NewKeyRef(key, sg)
	}
	outs, err := delivery.Compile(a.outputs(), sg.Points)
	if err != nil {
		return nil, fmt.Errorf("aggregation %q: %w", a.Name, err)
	}
	c.Outputs, c.Quantiles, c.Accumulators = outs.Outputs, outs.Quantiles, outs.Accumulators
	for _, key := range outs.Keys {
		c.Distinct = append(c.Distinct, ingest.NewDistinctKeyRef(key, sg))
	}
	c.Histogram = delivery.Has(c.Outputs, delivery.Histogram)
	if h := a.Histogram; h != nil && h.Explicit != nil {
		if c.Bounds, err = a.bucketBounds(c.UnitScale); err != nil {
			return nil, fmt.Errorf("aggregation %q: histogram.explicit.buckets: %w", a.Name, err)
		}
	}
	if c.Exemplars = a.Exemplars.perPoint(); c.Exemplars > 0 && !c.Histogram {
		c.Exemplars = 1 // the max gauge's alone
	}
	c.Point = metricinput.Target{Index: c.Index, Histogram: c.Histogram, Quantiles: len(c.Quantiles) > 0, Bounds: c.Bounds,
		Sketch: c.EngineAggregation(0).KeepsSketch()}
	return c, nil
}
