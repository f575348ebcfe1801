package windowaggregator

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/processor/sketch"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// What one metric data point adds to one aggregation, by the kind of its metric: a gauge's value; a
// delta sum's increase; a cumulative sum's increase since its stream's last point (a reset, or the
// first point of a stream that began while the component watched, counting whole; another first
// point only setting the base); a histogram's distribution, a cumulative one's bucket by bucket
// likewise.

// pointKind is what the points of a metric are, for the aggregations.
type pointKind uint8

const (
	pointValue       pointKind = iota // a gauge, or a sum that is not monotonic: values
	pointIncrease                     // a monotonic delta sum: each value is an increase
	pointCounter                      // a monotonic cumulative sum: the increase since the last point
	pointHistogram                    // explicit bounds, delta or cumulative
	pointExponential                  // exponential, delta or cumulative
	pointSummary                      // not aggregated
	pointNone                         // an empty metric
)

// kindOf returns the kind of a metric's points, and whether they are cumulative.
func kindOf(m pmetric.Metric) (kind pointKind, cumulative bool) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return pointValue, false
	case pmetric.MetricTypeSum:
		s := m.Sum()
		switch {
		case !s.IsMonotonic():
			return pointValue, false
		case s.AggregationTemporality() == pmetric.AggregationTemporalityDelta:
			return pointIncrease, false
		}
		return pointCounter, true // cumulative, or unspecified, which the Prometheus receiver's are not
	case pmetric.MetricTypeHistogram:
		return pointHistogram, m.Histogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeExponentialHistogram:
		return pointExponential, m.ExponentialHistogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeSummary:
		return pointSummary, false
	}
	return pointNone, false
}

// pointOutcome is what an aggregation made of a point: each a metric_points counter attribute.
type pointOutcome uint8

const (
	pointAggregated      pointOutcome = iota // staged for its windows
	pointBase                                // a cumulative stream's first point: sets its base only
	pointOutOfOrder                          // at or before its stream's last point
	pointEmpty                               // a histogram without a new value
	pointStreamLimit                         // a new stream past max_input_streams
	pointSummaryOutcome                      // a summary
	pointNoRecordedValue                     // flagged as having no recorded value
	numPointOutcomes
)

var pointOutcomeNames = [numPointOutcomes]string{
	pointAggregated: "aggregated", pointBase: "base", pointOutOfOrder: "out_of_order", pointEmpty: "empty",
	pointStreamLimit: "stream_limit", pointSummaryOutcome: "summary", pointNoRecordedValue: "no_recorded_value",
}

// held reports whether a point of this outcome was taken into the aggregation's input state though
// it adds nothing: with drop_aggregated_input it leaves the pipeline, as the aggregated ones do.
func (o pointOutcome) held() bool { return o == pointBase || o == pointOutOfOrder || o == pointEmpty }

// pointAdd is what a point adds to one aggregation: with outcome pointAggregated, a distribution
// (dist), or else weight records of value (NaN: none, why says).
type pointAdd struct {
	outcome      pointOutcome
	value        float64
	why          valueReason
	weight       uint32
	dist         *stream.Distribution
	reset        bool // the point reset its stream: it counts whole
	incompatible bool // a histogram left out of the histogram output or the percentiles
}

func valueAdd(v float64, why valueReason) pointAdd {
	return pointAdd{outcome: pointAggregated, value: v, why: why, weight: 1}
}

// add returns what the reader's point adds to aggregation a, updating a's stream of it. Under
// metricInputs.mu.
func (rd *metricReader) add(a *aggregation, in *metricInputs) pointAdd {
	switch rd.kind {
	case pointCounter:
		return rd.addCounter(a, in)
	case pointHistogram:
		return rd.addHistogram(a, in)
	case pointExponential:
		return rd.addExponential(a, in)
	}
	return valueAdd(numberOf(rd.num))
}

// numberOf reads a number point's value.
func numberOf(dp pmetric.NumberDataPoint) (float64, valueReason) {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue()), valueOK
	}
	return finite(dp.DoubleValue())
}

// judge finds a's stream of the reader's point, at t with start, and judges the point against it:
// stop is the outcome of a point that adds nothing whatever its value (a new stream past the limit,
// a point out of order), else pointAggregated; fresh says the stream is new, and whole that it began
// while the component watched, so that its first point counts whole.
func (rd *metricReader) judge(a *aggregation, in *metricInputs, t int64, start uint64) (st *inputStream, fresh, whole bool, stop pointOutcome) {
	st, fresh = in.stream(a.index, rd.streamKey())
	switch {
	case st == nil:
		return nil, true, false, pointStreamLimit
	case !fresh && t <= st.last:
		return st, false, false, pointOutOfOrder
	}
	whole = fresh && start != 0 && int64(start) >= in.since && int64(start) > in.byAgg[a.index].forgottenUpTo
	return st, fresh, whole, pointAggregated
}

// restarted reports whether a point with start comes from a later run of the stream than its last
// point, prev: both starts are set, and this one is later.
func restarted(prev *inputStream, start uint64) bool {
	return start != 0 && prev.start != 0 && start > prev.start
}

func (rd *metricReader) addCounter(a *aggregation, in *metricInputs) pointAdd {
	dp := rd.num
	v, why := numberOf(dp)
	if why != valueOK {
		return valueAdd(v, why) // counted without a value; the base stays
	}
	t, start := int64(dp.Timestamp()), uint64(dp.StartTimestamp())
	st, fresh, whole, stop := rd.judge(a, in, t, start)
	if stop != pointAggregated {
		return pointAdd{outcome: stop}
	}
	prev := *st
	st.last, st.start, st.value = t, start, v
	switch {
	case fresh && !whole:
		return pointAdd{outcome: pointBase}
	case fresh:
		return valueAdd(v, valueOK)
	case v < prev.value || restarted(&prev, start):
		add := valueAdd(v, valueOK)
		add.reset = true
		return add
	}
	return valueAdd(v-prev.value, valueOK)
}

// histogramHead is what a histogram point of either form says of its values as a whole.
type histogramHead struct {
	count     uint64
	sum       float64
	sumWhy    valueReason // valueOK: sum is their finite sum
	min, max  float64
	hasMinMax bool
}

func headOf(count uint64, hasSum bool, sum float64, hasMin bool, lo float64, hasMax bool, hi float64) histogramHead {
	h := histogramHead{count: count, sum: sum, min: lo, max: hi, hasMinMax: hasMin && hasMax}
	switch {
	case !hasSum:
		h.sumWhy = valueMissing
	case math.IsNaN(sum) || math.IsInf(sum, 0):
		h.sumWhy = valueNotFinite
	}
	return h
}

// less returns the head of the values added since prev, the stream's last point: their count and
// sum, but not their min and max.
func (h histogramHead) less(prev *inputStream) histogramHead {
	d := histogramHead{count: h.count - prev.count, sum: h.sum - prev.value, sumWhy: h.sumWhy}
	if d.sumWhy == valueOK && (math.IsNaN(d.sum) || math.IsInf(d.sum, 0)) {
		d.sumWhy = valueNotFinite // the last point had none
	}
	return d
}

// distribution returns what a histogram of head h, bucket counts buckets (of a's explicit buckets;
// nil: none) and sketch sk (nil: none) adds: a distribution, or, without a finite sum, count records
// without a value; nothing for no value.
func (rd *metricReader) distribution(h histogramHead, buckets []uint64, sk *sketch.Histogram, incompatible bool) pointAdd {
	switch {
	case h.count == 0:
		return pointAdd{outcome: pointEmpty}
	case h.sumWhy != valueOK:
		return pointAdd{outcome: pointAggregated, value: math.NaN(), why: h.sumWhy, weight: uint32(min(h.count, maxWeight)), incompatible: incompatible}
	}
	d := rd.newDist(len(buckets))
	d.Count, d.Sum = h.count, h.sum
	d.Min, d.Max, d.HasMinMax = h.min, h.max, h.hasMinMax
	copy(d.Buckets, buckets)
	d.Sketch = sk
	return pointAdd{outcome: pointAggregated, dist: d, incompatible: incompatible}
}

// feedsHistogram reports whether the aggregation has a histogram output; feedsSketch whether it
// keeps a sketch (an exponential histogram output, or percentiles).
func (a *aggregation) feedsHistogram() bool { return a.hasOutput(outputHistogram) }

func (a *aggregation) feedsSketch() bool {
	return len(a.quantiles) > 0 || a.bounds == nil && a.hasOutput(outputHistogram)
}

func (rd *metricReader) addHistogram(a *aggregation, in *metricInputs) pointAdd {
	dp := rd.hist
	h := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	rd.readCounts()
	// own: its buckets are the aggregation's explicit buckets, and add up to its count
	own := a.bounds != nil && sameBounds(dp.ExplicitBounds(), a.bounds) && addsUp(rd.counts, h.count)
	incompatible := !own && a.feedsHistogram() || len(a.quantiles) > 0
	var buckets []uint64
	if own {
		buckets = rd.counts
	}
	if !rd.cumulative {
		return rd.distribution(h, buckets, nil, incompatible)
	}
	t, start := int64(dp.Timestamp()), uint64(dp.StartTimestamp())
	st, fresh, whole, stop := rd.judge(a, in, t, start)
	if stop != pointAggregated {
		return pointAdd{outcome: stop}
	}
	bounds := rd.boundsHash()
	prev := *st
	reset := !fresh && (h.count < prev.count || bounds != prev.bounds || restarted(&prev, start) ||
		own && prev.buckets != nil && !covers(rd.counts, prev.buckets))
	add, done := rd.wholeOrBase(fresh, whole, reset, h, buckets, nil, incompatible)
	if !done {
		var diff []uint64
		if own && prev.buckets != nil {
			rd.diff = subtractCounts(rd.diff[:0], rd.counts, prev.buckets)
			diff = rd.diff
		}
		add = rd.distribution(h.less(&prev), diff, nil, incompatible || own && diff == nil)
	}
	st.last, st.start, st.count, st.value, st.bounds = t, start, h.count, h.sum, bounds
	st.buckets = nil
	if own {
		st.buckets = append(prev.buckets[:0], rd.counts...)
	}
	return add
}

// wholeOrBase returns what a cumulative histogram point adds when it is its stream's first point
// (whole, if the stream began while watched, else a base) or a reset (whole: h, with buckets and
// sk); done is false for the other points, whose increase the caller works out.
func (rd *metricReader) wholeOrBase(fresh, whole, reset bool, h histogramHead, buckets []uint64, sk *sketch.Histogram,
	incompatible bool) (add pointAdd, done bool) {
	switch {
	case fresh && !whole:
		return pointAdd{outcome: pointBase}, true
	case fresh || reset:
		add = rd.distribution(h, buckets, sk, incompatible)
		add.reset = reset
		return add, true
	}
	return pointAdd{}, false
}

// readCounts reads the explicit histogram point's bucket counts into rd.counts, once a point (the
// aggregations that take it share them; none changes them).
func (rd *metricReader) readCounts() {
	if !rd.countsRead {
		rd.counts = appendCounts(rd.counts[:0], rd.hist.BucketCounts())
		rd.countsRead = true
	}
}

// boundsHash returns the hash of the explicit histogram point's bounds, computed once a point.
func (rd *metricReader) boundsHash() uint64 {
	if !rd.boundsHashed {
		rd.bounds, rd.boundsHashed = hashBounds(rd.hist.ExplicitBounds()), true
	}
	return rd.bounds
}

// The scales an OpenTelemetry exponential histogram may have.
const (
	minExponentialScale = -10
	maxExponentialScale = 20
)

func (rd *metricReader) addExponential(a *aggregation, in *metricInputs) pointAdd {
	dp := rd.exp
	h := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	incompatible := a.bounds != nil && a.feedsHistogram()
	var cur *sketch.Histogram
	if a.feedsSketch() {
		if cur = rd.pointSketch(); cur == nil {
			incompatible = true
		}
	}
	if !rd.cumulative {
		return rd.distribution(h, nil, cur, incompatible)
	}
	t, start := int64(dp.Timestamp()), uint64(dp.StartTimestamp())
	st, fresh, whole, stop := rd.judge(a, in, t, start)
	if stop != pointAggregated {
		return pointAdd{outcome: stop}
	}
	prev := *st
	reset := !fresh && (h.count < prev.count || restarted(&prev, start))
	var inc *sketch.Histogram // the values added since prev
	if !fresh && !reset && cur != nil && prev.hist != nil {
		inc = rd.scratchSketch()
		inc.CopyFrom(cur)
		inc.Downscale(prev.hist.Scale())
		reset = !inc.Subtract(prev.hist) // a bucket below its last count
	}
	add, done := rd.wholeOrBase(fresh, whole, reset, h, nil, cur, incompatible)
	if !done {
		add = rd.distribution(h.less(&prev), nil, inc, incompatible || cur != nil && inc == nil)
	}
	st.last, st.start, st.count, st.value = t, start, h.count, h.sum
	switch {
	case cur == nil:
		st.hist = nil
	case st.hist == nil:
		st.hist = cur.Clone()
	default:
		st.hist.CopyFrom(cur)
	}
	return add
}

// pointSketch returns the reader's exponential point as a sketch, imported once per point; nil for
// a point whose scale is out of range or whose buckets do not add up to its count. The sketch is the
// reader's until the batch is applied.
func (rd *metricReader) pointSketch() *sketch.Histogram {
	if rd.imported {
		return rd.cur
	}
	rd.imported, rd.cur = true, nil
	dp := rd.exp
	if s := dp.Scale(); s < minExponentialScale || s > maxExponentialScale {
		return nil
	}
	pos, neg := dp.Positive(), dp.Negative()
	rd.counts = appendCounts(rd.counts[:0], pos.BucketCounts())
	rd.diff = appendCounts(rd.diff[:0], neg.BucketCounts())
	h := rd.scratchSketch()
	h.SetExponential(dp.Scale(), dp.ZeroCount(), pos.Offset(), rd.counts, neg.Offset(), rd.diff, dp.Sum(),
		dp.Min(), dp.Max(), dp.HasMin() && dp.HasMax())
	if h.Count() != dp.Count() {
		return nil
	}
	rd.cur = h
	return h
}

func appendCounts(dst []uint64, s pcommon.UInt64Slice) []uint64 {
	for _, c := range s.All() {
		dst = append(dst, c)
	}
	return dst
}

func sameBounds(got pcommon.Float64Slice, want []float64) bool {
	if got.Len() != len(want) {
		return false
	}
	for i, b := range got.All() {
		if b != want[i] {
			return false
		}
	}
	return true
}

// addsUp reports whether bucket counts add up to count.
func addsUp(counts []uint64, count uint64) bool {
	var n uint64
	for _, c := range counts {
		if n+c < n {
			return false
		}
		n += c
	}
	return n == count
}

// covers reports whether each bucket count is at least its last one.
func covers(counts, prev []uint64) bool {
	if len(counts) != len(prev) {
		return false
	}
	for i, c := range counts {
		if c < prev[i] {
			return false
		}
	}
	return true
}

func subtractCounts(dst, counts, prev []uint64) []uint64 {
	for i, c := range counts {
		dst = append(dst, c-prev[i])
	}
	return dst
}
