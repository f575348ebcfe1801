package windowaggregator

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

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
	weightKey keyRef    // the weight attribute, with weighAttribute
	outputs   []emitted // in table order (see outputs.go)
	quantiles []float64
	histMax   int       // buckets per sign of the exponential histogram output
	bounds    []float64 // the explicit histogram output's bucket bounds, in the value's unit; nil: exponential
	// exemplars kept per pane and point: max_per_data_point for the histogram's points, 1 for the
	// max gauge alone; 0: none
	exemplars int
}

func compileAggregation(index int, a AggregationConfig) (*aggregation, error) {
	sg := signalNamed(a.Signal)
	c := &aggregation{index: index, name: a.Name, signal: sg, histMax: defaultHistogramMaxSize}
	if h := a.Histogram; h != nil && h.Exponential != nil && h.Exponential.MaxSize != 0 {
		c.histMax = h.Exponential.MaxSize
	}
	if a.Where != nil {
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
	}
	for _, k := range a.GroupBy {
		c.groupBy = append(c.groupBy, newKeyRef(k, sg))
	}
	c.stampsInstance = stampsInstance(c)
	switch {
	case a.isDuration():
		c.duration, c.hasValue = true, true
		c.unit = a.Unit
		if c.unit == "" {
			c.unit = "ms"
		}
		c.unitScale = unitScale[c.unit]
	case strings.HasPrefix(a.Value, valueAttributePrefix):
		c.valueKey = newKeyRef(strings.TrimPrefix(a.Value, valueAttributePrefix), sg)
		c.hasValue = true
	}
	switch w := a.weight(); {
	case w == weightAdjustedCountName:
		c.weight = weighAdjustedCount
	case strings.HasPrefix(w, valueAttributePrefix):
		c.weight, c.weightKey = weighAttribute, newKeyRef(strings.TrimPrefix(w, valueAttributePrefix), sg)
	}
	var err error
	if c.outputs, c.quantiles, err = compileOutputs(a.outputs()); err != nil {
		return nil, fmt.Errorf("aggregation %q: %w", a.Name, err)
	}
	if h := a.Histogram; h != nil && h.Explicit != nil {
		if c.bounds, err = a.bucketBounds(c.unitScale); err != nil {
			return nil, fmt.Errorf("aggregation %q: histogram.explicit.buckets: %w", a.Name, err)
		}
	}
	if c.exemplars = a.Exemplars.perPoint(); c.exemplars > 0 && !c.hasOutput(outputHistogram) {
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
	hist := c.hasOutput(outputHistogram)
	return stream.Aggregation{MaxSeries: maxSeries, Quantiles: c.quantiles, Histogram: hist && c.bounds == nil, Bounds: c.bounds,
		Exemplars: c.exemplars}
}
