package metricinput

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// What one metric data point is, and what it adds to one aggregation, by the kind of its metric: a
// gauge's value; a delta sum's increase; a cumulative sum's increase since its stream's last point (a
// reset, or the first point of a stream that began while the component watched, counting whole;
// another first point only setting the base); a histogram's distribution, a cumulative one's bucket by
// bucket likewise (histograms.go).

// Kind is what the points of a metric are, for the aggregations.
type Kind uint8

const (
	KindValue       Kind = iota // a gauge, or a sum that is not monotonic: values
	KindIncrease                // a monotonic delta sum: each value is an increase
	KindCounter                 // a monotonic cumulative sum: the increase since the last point
	KindHistogram               // explicit bounds, delta or cumulative
	KindExponential             // exponential, delta or cumulative
	KindSummary                 // not aggregated
	KindNone                    // an empty metric
)

// KindOf returns the kind of a metric's points, and whether they are cumulative.
func KindOf(m pmetric.Metric) (kind Kind, cumulative bool) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return KindValue, false
	case pmetric.MetricTypeSum:
		s := m.Sum()
		switch {
		case !s.IsMonotonic():
			return KindValue, false
		case s.AggregationTemporality() == pmetric.AggregationTemporalityDelta:
			return KindIncrease, false
		}
		return KindCounter, true // cumulative, or unspecified, which the Prometheus receiver's are not
	case pmetric.MetricTypeHistogram:
		return KindHistogram, m.Histogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeExponentialHistogram:
		return KindExponential, m.ExponentialHistogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeSummary:
		return KindSummary, false
	}
	return KindNone, false
}

// Times returns the point's Timestamp and StartTimestamp.
func (p *Point) Times() (t int64, start uint64) {
	switch p.Kind {
	case KindHistogram:
		return int64(p.Hist.Timestamp()), uint64(p.Hist.StartTimestamp())
	case KindExponential:
		return int64(p.Exp.Timestamp()), uint64(p.Exp.StartTimestamp())
	}
	return int64(p.Num.Timestamp()), uint64(p.Num.StartTimestamp())
}

// Outcome is what an aggregation made of a point: each a metric_points counter attribute.
type Outcome uint8

const (
	Aggregated      Outcome = iota // staged for its windows
	Base                           // a cumulative stream's first point: sets its base only
	OutOfOrder                     // at or before its stream's last point
	Empty                          // a histogram without a new value
	StreamLimit                    // a new stream past max_input_streams
	SummaryOutcome                 // a summary
	NoRecordedValue                // flagged as having no recorded value
	NumOutcomes
)

var OutcomeNames = [NumOutcomes]string{
	Aggregated: "aggregated", Base: "base", OutOfOrder: "out_of_order", Empty: "empty",
	StreamLimit: "stream_limit", SummaryOutcome: "summary", NoRecordedValue: "no_recorded_value",
}

// Held reports whether a point of this outcome was taken into the aggregation's input state though
// it adds nothing: with drop_aggregated_input it leaves the pipeline, as the aggregated ones do.
func (o Outcome) Held() bool { return o == Base || o == OutOfOrder || o == Empty }

// Point is the point being read, in the field of its kind, with the key of its input stream.
type Point struct {
	Kind       Kind
	Cumulative bool
	Num        pmetric.NumberDataPoint
	Hist       pmetric.HistogramDataPoint
	Exp        pmetric.ExponentialHistogramDataPoint
	// StreamKey returns the key of the point's input stream, computed when a cumulative stream first
	// asks.
	StreamKey func() Key
}

// Fault is why a histogram point is left out of an aggregation's histogram output and
// percentiles (each name an incompatible_histograms reason): a point that breaks the data model
// (malformed), or one that does not fit what the aggregation keeps.
type Fault uint8

const (
	Fits                   Fault = iota
	faultBucketCounts            // explicit: not one bucket count more than bounds
	faultBounds                  // explicit: bounds not strictly ascending, or not finite
	faultScale                   // exponential: a scale outside [-10, 20]
	faultIndices                 // exponential: an occupied bucket outside the finite floats at its scale
	faultNotAddingUp             // bucket counts (and zero count) that do not add up to the count
	faultOtherBounds             // explicit, of other bounds than the explicit output's
	faultOtherKind               // the other kind than the histogram output's; explicit, for percentiles
	faultNoPreviousBuckets       // cumulative: its stream's last point had no buckets to subtract
	NumFaults
)

var FaultNames = [NumFaults]string{
	faultBucketCounts: "bucket_counts", faultBounds: "bounds", faultScale: "scale", faultIndices: "indices",
	faultNotAddingUp: "not_adding_up", faultOtherBounds: "other_bounds", faultOtherKind: "other_kind",
	faultNoPreviousBuckets: "no_previous_buckets",
}

// malformed reports whether the fault breaks the data model: the point is counted whatever the
// aggregation's outputs.
func (f Fault) malformed() bool { return f >= faultBucketCounts && f <= faultIndices }

// Add is what a point adds to one aggregation: with outcome Aggregated, a distribution
// (dist), or else weight records of value (NaN: none, why says).
type Add struct {
	Outcome Outcome
	Value   float64
	Why     values.Reason
	Weight  uint32
	Dist    *stream.Distribution
	Reset   bool  // the point reset its stream: it counts whole
	Fault   Fault // a histogram left out of the histogram output or the percentiles, and why
}

func ValueAdd(v float64, why values.Reason) Add {
	return Add{Outcome: Aggregated, Value: v, Why: why, Weight: 1}
}

// Adder works out what the points of one ingest call add to each aggregation: what it reads of
// a point once for every aggregation (its bucket counts, its sketch, what breaks the data model in
// it), the distributions it stages, from slabs it keeps, and its tally.
type Adder struct {
	imported bool              // cur is the point's sketch (see pointSketch)
	cur      *sketch.Histogram // nil: none
	// countsRead: counts holds an explicit point's bucket counts; boundsHashed: bounds is the hash
	// of its bounds (see readCounts, boundsHash); faultRead: fault is what breaks the data model in
	// its bounds (see boundsFault)
	countsRead, boundsHashed, faultRead bool
	bounds                              uint64
	fault                               Fault
	counts, diff                        []uint64 // buffers for bucket counts
	// The distributions staged in this call, and their bucket counts: slabs that the adder keeps
	// (while the reader's pool does), so that a batch of histograms allocates a few slabs, not a
	// distribution and its counts per point.
	dists                   [][]stream.Distribution
	bucketSlab              []uint64
	sketches                []*sketch.Histogram
	usedDists, usedSketches int
	// Tally counts what the aggregations made of the call's points, by aggregation index.
	Tally []Tally
}

// Tally is one aggregation's counts of one call, for metric_points, input_resets and
// incompatible_histograms (by reason).
type Tally struct {
	Outcomes     [NumOutcomes]int64
	Resets       int64
	Incompatible [NumFaults]int64
}

// distSlab and bucketSlabLen are the sizes of the slabs of distributions and of bucket counts;
// maxPooledSketches bounds the sketches a pooled adder keeps: a batch of many exponential points
// must not leave all of theirs behind.
const (
	distSlab          = 256
	bucketSlabLen     = 4096
	maxPooledSketches = 256
)

// Refuse tallies a point that aggregation a leaves out, as outcome says (a summary, no recorded
// value).
func (pa *Adder) Refuse(a *Target, outcome Outcome) {
	pa.Tally[a.Index].Outcomes[outcome]++
}

// Count tallies what a point adds to aggregation a.
func (pa *Adder) Count(a *Target, add *Add) {
	tl := &pa.Tally[a.Index]
	tl.Outcomes[add.Outcome]++
	if add.Reset {
		tl.Resets++
	}
	tl.Incompatible[add.Fault]++ // Fits is not reported
}

// Begin readies the adder for a call with aggs aggregations.
func (pa *Adder) Begin(aggs int) {
	if cap(pa.Tally) < aggs {
		pa.Tally = make([]Tally, aggs)
	}
	pa.Tally = pa.Tally[:aggs]
}

// Next readies the adder for another point.
func (pa *Adder) Next() {
	pa.imported, pa.cur = false, nil
	pa.countsRead, pa.boundsHashed, pa.faultRead = false, false, false
}

// Release drops the call's distributions and sketches, keeping their slabs.
func (pa *Adder) Release() {
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
	clear(pa.Tally)
}

// newDist returns a distribution for a record staged in this call, with n bucket counts (nil for
// none).
func (pa *Adder) newDist(n int) *stream.Distribution {
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
func (pa *Adder) scratchSketch() *sketch.Histogram {
	if pa.usedSketches == len(pa.sketches) {
		pa.sketches = append(pa.sketches, sketch.New(sketch.DefaultScale, sketch.DefaultMaxBuckets))
	}
	h := pa.sketches[pa.usedSketches]
	pa.usedSketches++
	return h
}

// NumberOf reads a number point's value: none for a point whose value is not set (OTLP requires one,
// but a point can come without).
func NumberOf(dp pmetric.NumberDataPoint) (float64, values.Reason) {
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		return float64(dp.IntValue()), values.OK
	case pmetric.NumberDataPointValueTypeDouble:
		return values.Finite(dp.DoubleValue())
	}
	return math.NaN(), values.Missing
}

// IncreaseOf reads a monotonic sum's point: a negative value is no increase, and is left out, so that
// a monotonic output stays monotonic.
func IncreaseOf(dp pmetric.NumberDataPoint) (float64, values.Reason) {
	v, why := NumberOf(dp)
	if why == values.OK && v < 0 {
		return math.NaN(), values.Negative
	}
	return v, why
}

// judge finds a's stream of point p and judges the point against it:
// stop is the outcome of a point that adds nothing whatever its value (a new stream past the limit,
// a point out of order), else Aggregated; fresh says the stream is new, and whole that it began
// while the component watched, so that its first point counts whole.
func judge(p *Point, a *Target, in *Inputs) (j judged, stop Outcome) {
	j.t, j.start = p.Times()
	j.st, j.fresh = in.Stream(a.Index, p.StreamKey())
	switch {
	case j.st == nil:
		return j, StreamLimit
	case !j.fresh && j.t <= j.st.Last:
		return j, OutOfOrder
	}
	j.prev = *j.st
	j.whole = j.fresh && j.start != 0 && int64(j.start) >= in.Since && int64(j.start) > in.ByAgg[a.Index].ForgottenUpTo
	return j, Aggregated
}

// judged is a point of a cumulative input, judged against its stream (see judge): the stream (st), its
// last point before this one (prev), the point's Timestamp (t) and StartTimestamp (start), whether the
// stream is new (fresh), and whether it began while the component watched (whole).
type judged struct {
	st           *Stream
	prev         Stream
	t            int64
	start        uint64
	fresh, whole bool
}

// restarted reports whether a point with start comes from a later run of the stream than its last
// point, prev: both starts are set, and this one is later.
func restarted(prev *Stream, start uint64) bool {
	return start != 0 && prev.Start != 0 && start > prev.Start
}

func (pa *Adder) AddCounter(p *Point, a *Target, in *Inputs) Add {
	dp := p.Num
	v, why := IncreaseOf(dp)
	if why != values.OK {
		return ValueAdd(v, why) // counted without a value; the base stays
	}
	j, stop := judge(p, a, in)
	if stop != Aggregated {
		return Add{Outcome: stop}
	}
	j.st.Last, j.st.Start, j.st.Value = j.t, j.start, v
	switch {
	case j.fresh && !j.whole:
		return Add{Outcome: Base}
	case j.fresh:
		return ValueAdd(v, values.OK)
	case v < j.prev.Value || restarted(&j.prev, j.start):
		add := ValueAdd(v, values.OK)
		add.Reset = true
		return add
	}
	return ValueAdd(v-j.prev.Value, values.OK)
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
func (h histogramHead) less(prev *Stream) histogramHead {
	d := histogramHead{count: h.count - prev.Count, sum: h.sum - prev.Value, sumWhy: h.sumWhy}
	if d.sumWhy == values.OK && (math.IsNaN(d.sum) || math.IsInf(d.sum, 0)) {
		d.sumWhy = values.NotFinite // the last point had none
	}
	return d
}

// distribution returns what a histogram of head h, bucket counts buckets (of a's explicit buckets;
// nil: none) and sketch sk (nil: none) adds: a distribution, or, without a finite sum, one of count
// values that count in count alone; nothing for no value.
func (pa *Adder) distribution(h histogramHead, buckets []uint64, sk *sketch.Histogram, fault Fault) Add {
	switch {
	case h.count == 0:
		return Add{Outcome: Empty}
	case h.sumWhy != values.OK:
		d := pa.newDist(0)
		d.Count, d.NoValues = h.count, true
		return Add{Outcome: Aggregated, Dist: d, Why: h.sumWhy, Fault: fault}
	}
	d := pa.newDist(len(buckets))
	d.Count, d.Sum = h.count, h.sum
	d.Min, d.Max, d.HasMinMax = h.min, h.max, h.hasMinMax
	copy(d.Buckets, buckets)
	d.Sketch = sk
	return Add{Outcome: Aggregated, Dist: d, Fault: fault}
}

// Target is what an aggregation asks of the points it takes: its index, whether it has a
// histogram output (histogram) and percentiles (quantiles), its explicit histogram bounds (nil: none,
// or an exponential output), and whether it keeps a sketch (an exponential histogram output, or
// percentiles).
type Target struct {
	Index                        int
	Histogram, Quantiles, Sketch bool
	Bounds                       []float64
}

// wholeOrBase returns what a cumulative histogram point adds when it is its stream's first point
// (whole, if the stream began while watched, else a base) or a reset (whole: h, with buckets and
// sk); done is false for the other points, whose increase the caller works out.
func (pa *Adder) wholeOrBase(fresh, whole, reset bool, h histogramHead, buckets []uint64, sk *sketch.Histogram,
	fault Fault) (add Add, done bool) {
	switch {
	case fresh && !whole:
		return Add{Outcome: Base}, true
	case fresh || reset:
		add = pa.distribution(h, buckets, sk, fault)
		add.Reset = reset
		return add, true
	}
	return Add{}, false
}
