package delivery

import (
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metadata"
)

// overflowAttrKey is the one attribute of an aggregation's overflow series.
const overflowAttrKey = "otel.metric.overflow"

// builder turns engine results into pdata: one metric per output named <name>.<output>, data
// points stamped with the window, attributes from the series key, and one ResourceMetrics per distinct
// set of group-by values read from the resource.
type builder struct {
	aggs        []*Aggregation
	version     string
	temporality pmetric.AggregationTemporality // of the additive outputs
	// instance is the service.instance.id of the outputs (see Emitter.SetInstance), put on the output
	// resources of the aggregations that stamp it (Aggregation.StampsInstance), so that a backend sees
	// each series from one writer when several collectors compute them; "" for none.
	instance string

	md     pmetric.Metrics
	points int
	// maxPoints bounds the points of one batch: past it a batch is closed into full and another
	// begun, so that requests come out bounded without copying; 0: unbounded.
	maxPoints int
	full      []builtBatch
	resources map[string]*resourceOut // by resource identity (see add)
	resKey    serieskey.Builder
	decoded   []serieskey.Value
	counts    []uint64
	// saturated counts, by aggregation, the data points built whose count did not fit (see
	// takeSaturated)
	saturated []int64
}

// resourceOut is one output resource and its scope, shared by the aggregations whose results have
// the same resource attributes.
type resourceOut struct {
	sm    pmetric.ScopeMetrics
	byAgg []*aggOut // by aggregation index, made on first use
}

// InstanceKey is the resource attribute that names the collector that computed a result.
const InstanceKey = "service.instance.id"

// aggOut is one aggregation's metrics under one resource: the metric of each of its outputs (by index
// in Aggregation.Outputs), made on first use.
type aggOut struct {
	sm      pmetric.ScopeMetrics
	metrics []pmetric.Metric
	made    []bool
}

func newBuilder(aggs []*Aggregation, version string, t pmetric.AggregationTemporality, maxPoints int) *builder {
	b := &builder{aggs: aggs, version: version, temporality: t, maxPoints: maxPoints, saturated: make([]int64, len(aggs))}
	b.reset()
	return b
}

func (b *builder) reset() {
	b.md = pmetric.NewMetrics()
	b.points = 0
	b.resources = map[string]*resourceOut{}
}

// builtBatch is one batch of data points built.
type builtBatch struct {
	md     pmetric.Metrics
	points int
}

// takeSaturated passes report the data points built since its last call whose count did not fit,
// by aggregation, and zeroes them.
func (b *builder) takeSaturated(report func(agg int, n int64)) {
	for i, n := range b.saturated {
		if n > 0 {
			report(i, n)
			b.saturated[i] = 0
		}
	}
}

// take returns the batches built so far and starts afresh.
func (b *builder) take() []builtBatch {
	if b.points == 0 && len(b.full) == 0 {
		return nil // nothing built: keep the empty batch rather than make another
	}
	out := b.full
	if b.points > 0 {
		out = append(out, builtBatch{b.md, b.points})
	}
	b.full = nil
	b.reset()
	return out
}

// add appends one result's data points.
func (b *builder) add(r *stream.Result) {
	a := b.aggs[r.Agg]
	if b.maxPoints > 0 && b.points > 0 && b.points+len(a.Outputs) > b.maxPoints {
		b.full = append(b.full, builtBatch{b.md, b.points})
		b.reset()
	}
	b.decoded = b.decoded[:0]
	b.resKey.Reset()
	// The resource's identity: the name and value of every group-by position whose value came from
	// the resource, so that results with equal resource attributes share a resource, and equal values
	// under other names do not; and whether it carries the collector's service.instance.id.
	if b.instance != "" && !a.StampsInstance {
		b.resKey.Str(serieskey.Record, InstanceKey)
	}
	if !r.Overflow {
		keys := a.GroupBy
		// Keys come from this component's own builder: a decoding error cannot happen short of memory
		// corruption or a checkpoint from another build, whose results are then emitted without
		// attributes rather than lost.
		_ = serieskey.Decode(r.Key, func(i int, v serieskey.Value) {
			b.decoded = append(b.decoded, v)
			if v.Source == serieskey.Resource && i < len(keys) {
				b.resKey.Str(serieskey.Record, keys[i])
				appendKeyValue(&b.resKey, v)
			}
		})
	}
	ro := b.resource(r.Agg)
	start, end := pcommon.Timestamp(r.Start), pcommon.Timestamp(r.End)
	pointStart := pcommon.Timestamp(r.Point.Start)
	// The first data point's attributes are built from the key; the others copy them, which costs
	// the same allocations and less work than putting each value again.
	var first pcommon.Map
	built := false
	attrs := func(m pcommon.Map) {
		switch {
		case built:
			first.CopyTo(m)
		case r.Overflow:
			m.PutBool(overflowAttrKey, true)
		default:
			b.putAttributes(m, r.Agg)
		}
		first, built = m, true
	}
	for i := range a.Outputs {
		e := &a.Outputs[i]
		if e.def.ofWindowValues || e.def.ofWindow {
			v, ok := e.gauge(r)
			switch {
			case !ok:
			case e.def.metric == shapeIntGauge:
				b.intPoint(b.metric(ro, i, a).Gauge().DataPoints(), start, end, e.def.intValue(r, e), attrs)
			default:
				dp := b.number(ro, i, a, start, end, v, attrs)
				if r.HasMaxExemplar && e.def.windowMax {
					putExemplar(dp.Exemplars().AppendEmpty(), &r.MaxExemplar)
				}
			}
			continue
		}
		if !r.HasPoint {
			continue
		}
		switch e.def.metric {
		case shapeCount:
			if r.Point.Count > math.MaxInt64 {
				b.saturated[r.Agg]++ // intValue gives the greatest int64
			}
			b.intPoint(b.metric(ro, i, a).Sum().DataPoints(), pointStart, end, e.def.intValue(r, e), attrs)
		case shapeSum:
			b.number(ro, i, a, pointStart, end, e.def.value(r, e), attrs)
		case shapeHistogram:
			if a.Bounds != nil {
				b.explicitHistogram(ro, i, r.Agg, pointStart, end, &r.Point, attrs)
			} else if r.Point.Hist != nil {
				b.histogram(ro, i, r.Agg, pointStart, end, &r.Point, attrs)
			}
		}
	}
}

// intPoint appends a data point of int value v over [start, end) to dps.
func (b *builder) intPoint(dps pmetric.NumberDataPointSlice, start, end pcommon.Timestamp, v int64, attrs func(pcommon.Map)) {
	dp := dps.AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(end)
	dp.SetIntValue(v)
	attrs(dp.Attributes())
	b.points++
}

// explicitHistogram appends the explicit-bucket histogram data point of point p.
func (b *builder) explicitHistogram(ro *aggOut, slot, agg int, start, end pcommon.Timestamp, p *stream.Point, attrs func(pcommon.Map)) {
	a := b.aggs[agg]
	dp := b.metric(ro, slot, a).Histogram().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(end)
	var n uint64
	for _, c := range p.BucketCounts {
		n = sketch.AddCounts(n, c) // saturating, as the engine's counts
	}
	if n == math.MaxUint64 {
		b.saturated[agg]++
	}
	dp.SetCount(n)
	setSummary(dp, n, p)
	dp.ExplicitBounds().FromRaw(a.Bounds)
	dp.BucketCounts().FromRaw(p.BucketCounts) // len(bounds)+1 of them, as stream.Point says
	putExemplars(dp.Exemplars(), p.Exemplars)
	attrs(dp.Attributes())
	b.points++
}

// histogramSummary is what setSummary sets, of either kind of histogram data point.
type histogramSummary interface {
	SetSum(float64)
	SetMin(float64)
	SetMax(float64)
}

// setSummary sets the sum, min and max of a histogram data point holding n of point p's values: when
// it holds them all (a metric input's histogram of other bounds, or of the other kind, adds to the
// point but to none of its buckets), and for the min and max when they are known (see stream.Point).
//
// Generic rather than taking the interface: a data point, a value, would be boxed at every call.
func setSummary[D histogramSummary](dp D, n uint64, p *stream.Point) {
	if n != p.ValueCount {
		return
	}
	dp.SetSum(p.Sum)
	if n > 0 && !math.IsInf(p.Min, 0) && !math.IsInf(p.Max, 0) {
		dp.SetMin(p.Min)
		dp.SetMax(p.Max)
	}
}

// putExemplars appends a point's exemplars.
func putExemplars(dst pmetric.ExemplarSlice, exs []exemplar.Exemplar) {
	if len(exs) == 0 {
		return
	}
	dst.EnsureCapacity(len(exs))
	for i := range exs {
		putExemplar(dst.AppendEmpty(), &exs[i])
	}
}

// putExemplar sets one exemplar: the span's ids, its value in the aggregation's unit and its end.
func putExemplar(dst pmetric.Exemplar, ex *exemplar.Exemplar) {
	dst.SetTraceID(ex.TraceID)
	dst.SetSpanID(ex.SpanID)
	dst.SetDoubleValue(ex.Value)
	dst.SetTimestamp(pcommon.Timestamp(ex.Time))
}

// histogram appends the exponential histogram data point of point p.
func (b *builder) histogram(ro *aggOut, slot, agg int, start, end pcommon.Timestamp, p *stream.Point, attrs func(pcommon.Map)) {
	a := b.aggs[agg]
	m := b.metric(ro, slot, a)
	dp := m.ExponentialHistogram().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(end)
	h := p.Hist
	if h.Count() == math.MaxUint64 {
		b.saturated[agg]++
	}
	dp.SetCount(h.Count())
	setSummary(dp, h.Count(), p)
	scale := h.ScaleFor(a.HistMax)
	dp.SetScale(scale)
	dp.SetZeroCount(h.ZeroCount())
	var off int32
	off, b.counts = h.AppendPositiveCountsAt(b.counts[:0], scale)
	dp.Positive().SetOffset(off)
	dp.Positive().BucketCounts().FromRaw(b.counts)
	off, b.counts = h.AppendNegativeCountsAt(b.counts[:0], scale)
	dp.Negative().SetOffset(off)
	dp.Negative().BucketCounts().FromRaw(b.counts)
	putExemplars(dp.Exemplars(), p.Exemplars)
	attrs(dp.Attributes())
	b.points++
}

// number appends a double data point to the Sum or Gauge of output slot, and returns it.
func (b *builder) number(ro *aggOut, slot int, a *Aggregation, start, end pcommon.Timestamp, v float64, attrs func(pcommon.Map)) pmetric.NumberDataPoint {
	m := b.metric(ro, slot, a)
	var dp pmetric.NumberDataPoint
	if m.Type() == pmetric.MetricTypeSum {
		dp = m.Sum().DataPoints().AppendEmpty()
	} else {
		dp = m.Gauge().DataPoints().AppendEmpty()
	}
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(end)
	dp.SetDoubleValue(v)
	attrs(dp.Attributes())
	b.points++
	return dp
}

// putAttributes sets the decoded group-by values under their keys, with their types.
func (b *builder) putAttributes(m pcommon.Map, agg int) {
	keys := b.aggs[agg].GroupBy
	m.EnsureCapacity(len(b.decoded))
	for i, v := range b.decoded {
		if i < len(keys) {
			putValue(m, keys[i], v)
		}
	}
}

func putValue(m pcommon.Map, k string, v serieskey.Value) {
	switch v.Kind {
	case serieskey.Str:
		m.PutStr(k, v.Str)
	case serieskey.Int:
		m.PutInt(k, v.Int)
	case serieskey.Double:
		m.PutDouble(k, v.Double)
	case serieskey.Bool:
		m.PutBool(k, v.Bool)
	case serieskey.Bytes:
		m.PutEmptyBytes(k).FromRaw([]byte(v.Str))
	}
}

func appendKeyValue(b *serieskey.Builder, v serieskey.Value) {
	switch v.Kind {
	case serieskey.Str:
		b.Str(v.Source, v.Str)
	case serieskey.Int:
		b.Int(v.Source, v.Int)
	case serieskey.Double:
		b.Double(v.Source, v.Double)
	case serieskey.Bool:
		b.Bool(v.Source, v.Bool)
	case serieskey.Bytes:
		b.Bytes(v.Source, []byte(v.Str))
	}
}

// resource returns the output resource for the resource part of the series key just decoded (in
// resKey), creating it with those values as attributes.
func (b *builder) resource(agg int) *aggOut {
	ro, ok := b.resources[string(b.resKey.Key())]
	if !ok {
		rm := b.md.ResourceMetrics().AppendEmpty()
		keys := b.aggs[agg].GroupBy
		for i, v := range b.decoded {
			if v.Source == serieskey.Resource && i < len(keys) {
				putValue(rm.Resource().Attributes(), keys[i], v)
			}
		}
		if b.instance != "" && b.aggs[agg].StampsInstance {
			rm.Resource().Attributes().PutStr(InstanceKey, b.instance)
		}
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(metadata.ScopeName)
		sm.Scope().SetVersion(b.version)
		ro = &resourceOut{sm: sm, byAgg: make([]*aggOut, len(b.aggs))}
		b.resources[string(b.resKey.Key())] = ro
	}
	ao := ro.byAgg[agg]
	if ao == nil {
		n := len(b.aggs[agg].Outputs)
		ao = &aggOut{sm: ro.sm, metrics: make([]pmetric.Metric, n), made: make([]bool, n)}
		ro.byAgg[agg] = ao
	}
	return ao
}

// metric returns the metric of output slot of one aggregation under one resource.
func (b *builder) metric(ro *aggOut, slot int, a *Aggregation) pmetric.Metric {
	if ro.made[slot] {
		return ro.metrics[slot]
	}
	m := ro.sm.Metrics().AppendEmpty()
	e := &a.Outputs[slot]
	m.SetName(a.Name + "." + e.name)
	e.describe(m, a, b.temporality)
	ro.metrics[slot], ro.made[slot] = m, true
	return m
}

// describe sets a new metric's unit, description and type for output e of aggregation a, its additive
// outputs with temporality t.
func (e *Emitted) describe(m pmetric.Metric, a *Aggregation, t pmetric.AggregationTemporality) {
	desc := e.def.description
	if key, ok := strings.CutPrefix(e.name, "distinct."); ok && e.def.accumulator != nil {
		desc = strings.Replace(desc, "<key>", key, 1)
	} else if e.def.pattern != nil {
		desc = strings.Replace(desc, e.def.name, e.name, 1)
	}
	m.SetDescription(desc)
	m.SetUnit(e.unitOf(a))
	switch e.def.metric {
	case shapeCount:
		s := m.SetEmptySum()
		s.SetAggregationTemporality(t)
		s.SetIsMonotonic(true)
	case shapeSum:
		s := m.SetEmptySum()
		s.SetAggregationTemporality(t)
		s.SetIsMonotonic(a.MonotonicSum()) // a duration, or a counter's increase, is never negative
	case shapeGauge, shapeIntGauge:
		m.SetEmptyGauge()
	case shapeHistogram:
		if a.Bounds != nil {
			m.SetEmptyHistogram().SetAggregationTemporality(t)
		} else {
			m.SetEmptyExponentialHistogram().SetAggregationTemporality(t)
		}
	}
}
