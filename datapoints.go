package windowaggregator

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// What one metric data point is, and what it adds to one aggregation, by the kind of its metric: a
// gauge's value; a delta sum's increase; a cumulative sum's increase since its stream's last point (a
// reset, or the first point of a stream that began while the component watched, counting whole;
// another first point only setting the base); a histogram's distribution, a cumulative one's bucket by
// bucket likewise (histograms.go).

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

// times returns the point's Timestamp and StartTimestamp.
func (p *dataPoint) times() (t int64, start uint64) {
	switch p.kind {
	case pointHistogram:
		return int64(p.hist.Timestamp()), uint64(p.hist.StartTimestamp())
	case pointExponential:
		return int64(p.exp.Timestamp()), uint64(p.exp.StartTimestamp())
	}
	return int64(p.num.Timestamp()), uint64(p.num.StartTimestamp())
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

// dataPoint is the point being read, in the field of its kind, with the key of its input stream.
type dataPoint struct {
	kind       pointKind
	cumulative bool
	num        pmetric.NumberDataPoint
	hist       pmetric.HistogramDataPoint
	exp        pmetric.ExponentialHistogramDataPoint
	// streamKey returns the key of the point's input stream, computed when a cumulative stream first
	// asks.
	streamKey func() metricinput.Key
}

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
	why     values.Reason
	weight  uint32
	dist    *stream.Distribution
	reset   bool           // the point reset its stream: it counts whole
	fault   histogramFault // a histogram left out of the histogram output or the percentiles, and why
}

func valueAdd(v float64, why values.Reason) pointAdd {
	return pointAdd{outcome: pointAggregated, value: v, why: why, weight: 1}
}

// pointAdder works out what the points of one ingest call add to each aggregation: what it reads of
// a point once for every aggregation (its bucket counts, its sketch, what breaks the data model in
// it), the distributions it stages, from slabs it keeps, and its tally.
type pointAdder struct {
	imported bool              // cur is the point's sketch (see pointSketch)
	cur      *sketch.Histogram // nil: none
	// countsRead: counts holds an explicit point's bucket counts; boundsHashed: bounds is the hash
	// of its bounds (see readCounts, boundsHash); faultRead: fault is what breaks the data model in
	// its bounds (see boundsFault)
	countsRead, boundsHashed, faultRead bool
	bounds                              uint64
	fault                               histogramFault
	counts, diff                        []uint64 // buffers for bucket counts
	// The distributions staged in this call, and their bucket counts: slabs that the adder keeps
	// (while the reader's pool does), so that a batch of histograms allocates a few slabs, not a
	// distribution and its counts per point.
	dists                   [][]stream.Distribution
	bucketSlab              []uint64
	sketches                []*sketch.Histogram
	usedDists, usedSketches int
	// tally counts what the aggregations made of the call's points, by aggregation index.
	tally []pointTally
}

// pointTally is one aggregation's counts of one call, for metric_points, input_resets and
// incompatible_histograms (by reason).
type pointTally struct {
	outcomes     [numPointOutcomes]int64
	resets       int64
	incompatible [numHistogramFaults]int64
}

// distSlab and bucketSlabLen are the sizes of the slabs of distributions and of bucket counts;
// maxPooledSketches bounds the sketches a pooled adder keeps: a batch of many exponential points
// must not leave all of theirs behind.
const (
	distSlab          = 256
	bucketSlabLen     = 4096
	maxPooledSketches = 256
)

// refuse tallies a point that aggregation a leaves out, as outcome says (a summary, no recorded
// value).
func (pa *pointAdder) refuse(a *aggregation, outcome pointOutcome) {
	pa.tally[a.index].outcomes[outcome]++
}

// count tallies what a point adds to aggregation a.
func (pa *pointAdder) count(a *aggregation, add *pointAdd) {
	tl := &pa.tally[a.index]
	tl.outcomes[add.outcome]++
	if add.reset {
		tl.resets++
	}
	tl.incompatible[add.fault]++ // histogramFits is not reported
}

// begin readies the adder for a call with aggs aggregations.
func (pa *pointAdder) begin(aggs int) {
	if cap(pa.tally) < aggs {
		pa.tally = make([]pointTally, aggs)
	}
	pa.tally = pa.tally[:aggs]
}

// next readies the adder for another point.
func (pa *pointAdder) next() {
	pa.imported, pa.cur = false, nil
	pa.countsRead, pa.boundsHashed, pa.faultRead = false, false, false
}

// release drops the call's distributions and sketches, keeping their slabs.
func (pa *pointAdder) release() {
	pa.cur, pa.imported = nil, false
	for i := range pa.usedDists {
		d := &pa.dists[i/distSlab][i%distSlab]
		d.Sketch, d.Buckets = nil, nil
	}
	pa.bucketSlab = pa.bucketSlab[:0]
	pa.usedDists, pa.usedSketches = 0, 0
	if len(pa.sketches) > maxPooledSketches {
		clear(pa.sketches[maxPooledSketches:])
		pa.sketches = pa.sketches[:maxPooledSketches]
	}
	clear(pa.tally)
}

// newDist returns a distribution for a record staged in this call, with n bucket counts (nil for
// none).
func (pa *pointAdder) newDist(n int) *stream.Distribution {
	if pa.usedDists == len(pa.dists)*distSlab {
		pa.dists = append(pa.dists, make([]stream.Distribution, distSlab))
	}
	d := &pa.dists[pa.usedDists/distSlab][pa.usedDists%distSlab]
	pa.usedDists++
	*d = stream.Distribution{}
	if n > 0 {
		if len(pa.bucketSlab)+n > cap(pa.bucketSlab) {
			// A new slab: the counts already handed out stay in the old one until Apply.
			pa.bucketSlab = make([]uint64, 0, max(bucketSlabLen, n))
		}
		d.Buckets = pa.bucketSlab[len(pa.bucketSlab) : len(pa.bucketSlab)+n]
		pa.bucketSlab = pa.bucketSlab[:len(pa.bucketSlab)+n]
	}
	return d
}

// scratchSketch returns a sketch that is the adder's until the call's batch is applied.
func (pa *pointAdder) scratchSketch() *sketch.Histogram {
	if pa.usedSketches == len(pa.sketches) {
		pa.sketches = append(pa.sketches, sketch.New(sketch.DefaultScale, sketch.DefaultMaxBuckets))
	}
	h := pa.sketches[pa.usedSketches]
	pa.usedSketches++
	return h
}

// numberOf reads a number point's value: none for a point whose value is not set (OTLP requires one,
// but a point can come without).
func numberOf(dp pmetric.NumberDataPoint) (float64, values.Reason) {
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		return float64(dp.IntValue()), values.OK
	case pmetric.NumberDataPointValueTypeDouble:
		return values.Finite(dp.DoubleValue())
	}
	return math.NaN(), values.Missing
}

// increaseOf reads a monotonic sum's point: a negative value is no increase, and is left out, so that
// a monotonic output stays monotonic.
func increaseOf(dp pmetric.NumberDataPoint) (float64, values.Reason) {
	v, why := numberOf(dp)
	if why == values.OK && v < 0 {
		return math.NaN(), values.Negative
	}
	return v, why
}

// judge finds a's stream of point p and judges the point against it:
// stop is the outcome of a point that adds nothing whatever its value (a new stream past the limit,
// a point out of order), else pointAggregated; fresh says the stream is new, and whole that it began
// while the component watched, so that its first point counts whole.
func judge(p *dataPoint, a *aggregation, in *metricinput.Inputs) (j judged, stop pointOutcome) {
	j.t, j.start = p.times()
	j.st, j.fresh = in.Stream(a.index, p.streamKey())
	switch {
	case j.st == nil:
		return j, pointStreamLimit
	case !j.fresh && j.t <= j.st.Last:
		return j, pointOutOfOrder
	}
	j.prev = *j.st
	j.whole = j.fresh && j.start != 0 && int64(j.start) >= in.Since && int64(j.start) > in.ByAgg[a.index].ForgottenUpTo
	return j, pointAggregated
}

// judged is a point of a cumulative input, judged against its stream (see judge): the stream (st), its
// last point before this one (prev), the point's Timestamp (t) and StartTimestamp (start), whether the
// stream is new (fresh), and whether it began while the component watched (whole).
type judged struct {
	st           *metricinput.Stream
	prev         metricinput.Stream
	t            int64
	start        uint64
	fresh, whole bool
}

// restarted reports whether a point with start comes from a later run of the stream than its last
// point, prev: both starts are set, and this one is later.
func restarted(prev *metricinput.Stream, start uint64) bool {
	return start != 0 && prev.Start != 0 && start > prev.Start
}

func (pa *pointAdder) addCounter(p *dataPoint, a *aggregation, in *metricinput.Inputs) pointAdd {
	dp := p.num
	v, why := increaseOf(dp)
	if why != values.OK {
		return valueAdd(v, why) // counted without a value; the base stays
	}
	j, stop := judge(p, a, in)
	if stop != pointAggregated {
		return pointAdd{outcome: stop}
	}
	j.st.Last, j.st.Start, j.st.Value = j.t, j.start, v
	switch {
	case j.fresh && !j.whole:
		return pointAdd{outcome: pointBase}
	case j.fresh:
		return valueAdd(v, values.OK)
	case v < j.prev.Value || restarted(&j.prev, j.start):
		add := valueAdd(v, values.OK)
		add.reset = true
		return add
	}
	return valueAdd(v-j.prev.Value, values.OK)
}

// histogramHead is what a histogram point of either form says of its values as a whole.
type histogramHead struct {
	count     uint64
	sum       float64
	sumWhy    values.Reason // values.OK: sum is their finite sum
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
		h.sumWhy = values.Missing
	case math.IsNaN(sum) || math.IsInf(sum, 0):
		h.sumWhy = values.NotFinite
	}
	return h
}

// less returns the head of the values added since prev, the stream's last point: their count and
// sum, but not their min and max.
func (h histogramHead) less(prev *metricinput.Stream) histogramHead {
	d := histogramHead{count: h.count - prev.Count, sum: h.sum - prev.Value, sumWhy: h.sumWhy}
	if d.sumWhy == values.OK && (math.IsNaN(d.sum) || math.IsInf(d.sum, 0)) {
		d.sumWhy = values.NotFinite // the last point had none
	}
	return d
}

// distribution returns what a histogram of head h, bucket counts buckets (of a's explicit buckets;
// nil: none) and sketch sk (nil: none) adds: a distribution, or, without a finite sum, one of count
// values that count in count alone; nothing for no value.
func (pa *pointAdder) distribution(h histogramHead, buckets []uint64, sk *sketch.Histogram, fault histogramFault) pointAdd {
	switch {
	case h.count == 0:
		return pointAdd{outcome: pointEmpty}
	case h.sumWhy != values.OK:
		d := pa.newDist(0)
		d.Count, d.NoValues = h.count, true
		return pointAdd{outcome: pointAggregated, dist: d, why: h.sumWhy, fault: fault}
	}
	d := pa.newDist(len(buckets))
	d.Count, d.Sum = h.count, h.sum
	d.Min, d.Max, d.HasMinMax = h.min, h.max, h.hasMinMax
	copy(d.Buckets, buckets)
	d.Sketch = sk
	return pointAdd{outcome: pointAggregated, dist: d, fault: fault}
}

// feedsHistogram reports whether the aggregation has a histogram output; feedsSketch whether it
// keeps a sketch (an exponential histogram output, or percentiles).
func (c *aggregation) feedsHistogram() bool { return c.histogram }

func (c *aggregation) feedsSketch() bool {
	return len(c.quantiles) > 0 || c.bounds == nil && c.histogram
}

// wholeOrBase returns what a cumulative histogram point adds when it is its stream's first point
// (whole, if the stream began while watched, else a base) or a reset (whole: h, with buckets and
// sk); done is false for the other points, whose increase the caller works out.
func (pa *pointAdder) wholeOrBase(fresh, whole, reset bool, h histogramHead, buckets []uint64, sk *sketch.Histogram,
	fault histogramFault) (add pointAdd, done bool) {
	switch {
	case fresh && !whole:
		return pointAdd{outcome: pointBase}, true
	case fresh || reset:
		add = pa.distribution(h, buckets, sk, fault)
		add.reset = reset
		return add, true
	}
	return pointAdd{}, false
}
