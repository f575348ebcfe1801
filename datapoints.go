package windowaggregator

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
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

// histogramFault is why a histogram point is left out of an aggregation's histogram output and
// percentiles (each name an incompatible_histograms reason): a point that breaks the data model
// (malformed), or one that does not fit what the aggregation keeps.
type histogramFault uint8

const (
	histogramFits          histogramFault = iota
	faultBucketCounts                     // explicit: not one bucket count more than bounds
	faultBounds                           // explicit: bounds not strictly ascending, or not finite
	faultScale                            // exponential: a scale outside [-10, 20]
	faultIndices                          // exponential: an occupied bucket outside the finite floats at its scale
	faultNotAddingUp                      // bucket counts (and zero count) that do not add up to the count
	faultOtherBounds                      // explicit, of other bounds than the explicit output's
	faultOtherKind                        // the other kind than the histogram output's; explicit, for percentiles
	faultNoPreviousBuckets                // cumulative: its stream's last point had no buckets to subtract
	numHistogramFaults
)

var histogramFaultNames = [numHistogramFaults]string{
	faultBucketCounts: "bucket_counts", faultBounds: "bounds", faultScale: "scale", faultIndices: "indices",
	faultNotAddingUp: "not_adding_up", faultOtherBounds: "other_bounds", faultOtherKind: "other_kind",
	faultNoPreviousBuckets: "no_previous_buckets",
}

// malformed reports whether the fault breaks the data model: the point is counted whatever the
// aggregation's outputs.
func (f histogramFault) malformed() bool { return f >= faultBucketCounts && f <= faultIndices }

// pointAdd is what a point adds to one aggregation: with outcome pointAggregated, a distribution
// (dist), or else weight records of value (NaN: none, why says).
type pointAdd struct {
	outcome pointOutcome
	value   float64
	why     valueReason
	weight  uint32
	dist    *stream.Distribution
	reset   bool           // the point reset its stream: it counts whole
	fault   histogramFault // a histogram left out of the histogram output or the percentiles, and why
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
	case pointIncrease:
		return valueAdd(increaseOf(rd.num))
	}
	return valueAdd(numberOf(rd.num))
}

// numberOf reads a number point's value: none for a point whose value is not set (OTLP requires one,
// but a point can come without).
func numberOf(dp pmetric.NumberDataPoint) (float64, valueReason) {
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		return float64(dp.IntValue()), valueOK
	case pmetric.NumberDataPointValueTypeDouble:
		return finite(dp.DoubleValue())
	}
	return math.NaN(), valueMissing
}

// increaseOf reads a monotonic sum's point: a negative value is no increase, and is left out, so that
// a monotonic output stays monotonic.
func increaseOf(dp pmetric.NumberDataPoint) (float64, valueReason) {
	v, why := numberOf(dp)
	if why == valueOK && v < 0 {
		return math.NaN(), valueNegative
	}
	return v, why
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
	v, why := increaseOf(dp)
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

// headOf returns a histogram point's head. Its min and max count only if both are set, finite and in
// order: a point that says otherwise has none.
func headOf(count uint64, hasSum bool, sum float64, hasMin bool, lo float64, hasMax bool, hi float64) histogramHead {
	h := histogramHead{count: count, sum: sum, min: lo, max: hi,
		hasMinMax: hasMin && hasMax && lo <= hi && !math.IsInf(lo, 0) && !math.IsInf(hi, 0)}
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
// nil: none) and sketch sk (nil: none) adds: a distribution, or, without a finite sum, one of count
// values that count in count alone; nothing for no value.
func (rd *metricReader) distribution(h histogramHead, buckets []uint64, sk *sketch.Histogram, fault histogramFault) pointAdd {
	switch {
	case h.count == 0:
		return pointAdd{outcome: pointEmpty}
	case h.sumWhy != valueOK:
		d := rd.newDist(0)
		d.Count, d.NoValues = h.count, true
		return pointAdd{outcome: pointAggregated, dist: d, why: h.sumWhy, fault: fault}
	}
	d := rd.newDist(len(buckets))
	d.Count, d.Sum = h.count, h.sum
	d.Min, d.Max, d.HasMinMax = h.min, h.max, h.hasMinMax
	copy(d.Buckets, buckets)
	d.Sketch = sk
	return pointAdd{outcome: pointAggregated, dist: d, fault: fault}
}

// feedsHistogram reports whether the aggregation has a histogram output; feedsSketch whether it
// keeps a sketch (an exponential histogram output, or percentiles).
func (a *aggregation) feedsHistogram() bool { return a.hasOutput(delivery.Histogram) }

func (a *aggregation) feedsSketch() bool {
	return len(a.quantiles) > 0 || a.bounds == nil && a.hasOutput(delivery.Histogram)
}

func (rd *metricReader) addHistogram(a *aggregation, in *metricInputs) pointAdd {
	dp := rd.hist
	h := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	rd.readCounts()
	// own: its buckets are the aggregation's explicit buckets, and add up to its count. Bounds that
	// are the aggregation's are finite and ascending: only others are checked.
	fault := rd.countsFault()
	own := false
	switch {
	case fault != histogramFits:
	case a.bounds == nil:
		fault = rd.boundsFault(faultOtherKind)
	case !sameBounds(dp.ExplicitBounds(), a.bounds):
		fault = rd.boundsFault(faultOtherBounds)
	case !addsUp(rd.counts, h.count):
		fault = faultNotAddingUp
	default:
		own = true
	}
	switch {
	case fault.malformed():
	case !own && a.feedsHistogram():
	case len(a.quantiles) > 0:
		fault = faultOtherKind // no sketch takes explicit buckets
	default:
		fault = histogramFits // left out of nothing the aggregation keeps
	}
	var buckets []uint64
	if own {
		buckets = rd.counts
	}
	if !rd.cumulative {
		return rd.distribution(h, buckets, nil, fault)
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
	add, done := rd.wholeOrBase(fresh, whole, reset, h, buckets, nil, fault)
	if !done {
		var diff []uint64
		if own && prev.buckets != nil {
			rd.diff = subtractCounts(rd.diff[:0], rd.counts, prev.buckets)
			diff = rd.diff
		}
		if own && diff == nil && fault == histogramFits {
			fault = faultNoPreviousBuckets
		}
		add = rd.distribution(h.less(&prev), diff, nil, fault)
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
	fault histogramFault) (add pointAdd, done bool) {
	switch {
	case fresh && !whole:
		return pointAdd{outcome: pointBase}, true
	case fresh || reset:
		add = rd.distribution(h, buckets, sk, fault)
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

// countsFault returns faultBucketCounts for an explicit histogram point whose bucket counts are not
// one more than its bounds (none of either is a point of count and sum alone): it breaks the data
// model.
func (rd *metricReader) countsFault() histogramFault {
	if n, b := len(rd.counts), rd.hist.ExplicitBounds().Len(); n != b+1 && (n != 0 || b != 0) {
		return faultBucketCounts
	}
	return histogramFits
}

// boundsFault returns faultBounds for an explicit histogram point whose bounds are not finite and
// strictly ascending (it breaks the data model), else other; it looks at the bounds once a point.
func (rd *metricReader) boundsFault(other histogramFault) histogramFault {
	if !rd.faultRead {
		rd.faultRead, rd.fault = true, histogramFits
		prev := math.Inf(-1)
		for _, b := range rd.hist.ExplicitBounds().All() {
			if !(b > prev) || math.IsInf(b, 1) { // NaN fails b > prev
				rd.fault = faultBounds
				break
			}
			prev = b
		}
	}
	if rd.fault != histogramFits {
		return rd.fault
	}
	return other
}

// exponentialFault returns what breaks the data model in the reader's exponential point, once a
// point: a scale outside [-10, 20], or an occupied bucket outside the indices of the finite floats at
// its scale (no histogram holds it, whatever its offset).
func (rd *metricReader) exponentialFault() histogramFault {
	if rd.faultRead {
		return rd.fault
	}
	rd.faultRead, rd.fault = true, histogramFits
	dp := rd.exp
	lo, hi, ok := sketch.IndexRange(dp.Scale())
	switch {
	case !ok:
		rd.fault = faultScale
	case !occupiedWithin(dp.Positive(), lo, hi) || !occupiedWithin(dp.Negative(), lo, hi):
		rd.fault = faultIndices
	}
	return rd.fault
}

// occupiedWithin reports whether the occupied buckets of b have indices in [lo, hi]: at once when its
// first and last buckets do, else bucket by bucket.
func occupiedWithin(b pmetric.ExponentialHistogramDataPointBuckets, lo, hi int) bool {
	counts := b.BucketCounts()
	n, off := counts.Len(), int(b.Offset())
	if n == 0 || off >= lo && off+n-1 <= hi {
		return true
	}
	for k, c := range counts.All() {
		if i := off + k; c != 0 && (i < lo || i > hi) {
			return false
		}
	}
	return true
}

func (rd *metricReader) addExponential(a *aggregation, in *metricInputs) pointAdd {
	dp := rd.exp
	h := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	fault := rd.exponentialFault()
	var cur *sketch.Histogram
	switch {
	case fault.malformed():
	case a.feedsSketch():
		if cur = rd.pointSketch(); cur == nil {
			fault = faultNotAddingUp
		} else if a.bounds != nil && a.feedsHistogram() {
			fault = faultOtherKind // percentiles take it, the explicit output does not
		}
	case a.bounds != nil && a.feedsHistogram():
		fault = faultOtherKind
	}
	if !rd.cumulative {
		return rd.distribution(h, nil, cur, fault)
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
	add, done := rd.wholeOrBase(fresh, whole, reset, h, nil, cur, fault)
	if !done {
		if cur != nil && inc == nil && fault == histogramFits {
			fault = faultNoPreviousBuckets
		}
		add = rd.distribution(h.less(&prev), nil, inc, fault)
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
// a point that no sketch holds (see exponentialFault) or whose buckets do not add up to its count. The
// sketch is the reader's until the batch is applied.
func (rd *metricReader) pointSketch() *sketch.Histogram {
	if rd.imported {
		return rd.cur
	}
	rd.imported, rd.cur = true, nil
	dp := rd.exp
	pos, neg := dp.Positive(), dp.Negative()
	rd.counts = appendCounts(rd.counts[:0], pos.BucketCounts())
	rd.diff = appendCounts(rd.diff[:0], neg.BucketCounts())
	h := rd.scratchSketch()
	head := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	if !h.SetExponential(dp.Scale(), dp.ZeroCount(), pos.Offset(), rd.counts, neg.Offset(), rd.diff, dp.Sum(),
		head.min, head.max, head.hasMinMax) || h.Count() != dp.Count() {
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
