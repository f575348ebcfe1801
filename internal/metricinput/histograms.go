package metricinput

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/cespare/xxhash/v2"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

// What a histogram point adds to an aggregation: to its explicit histogram output the counts of a
// point of the same bounds, to its sketch (an exponential histogram output, the percentiles) an
// exponential point, merged at the coarser scale; a cumulative point the increase since its stream's
// last point, bucket by bucket. A point of the other kind, of other bounds, or that breaks the data
// model adds to count and sum alone, and says why (Fault).

func (pa *Adder) AddHistogram(p *Point, a *Target, in *Inputs) Add {
	dp := p.Hist
	h := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	pa.readCounts(dp)
	// own: its buckets are the aggregation's explicit buckets, and add up to its count. Bounds that
	// are the aggregation's are finite and ascending: only others are checked.
	fault := pa.countsFault(dp)
	own := false
	switch {
	case fault != Fits:
	case a.Bounds == nil:
		fault = pa.boundsFault(dp, faultOtherKind)
	case !sameBounds(dp.ExplicitBounds(), a.Bounds):
		fault = pa.boundsFault(dp, faultOtherBounds)
	case !addsUp(pa.counts, h.count):
		fault = faultNotAddingUp
	default:
		own = true
	}
	switch {
	case fault.malformed():
	case !own && a.Histogram:
	case a.Quantiles:
		fault = faultOtherKind // no sketch takes explicit buckets
	default:
		fault = Fits // left out of nothing the aggregation keeps
	}
	var buckets []uint64
	if own {
		buckets = pa.counts
	}
	if !p.Cumulative {
		return pa.distribution(h, buckets, nil, fault)
	}
	j, stop := judge(p, a, in)
	if stop != Aggregated {
		return Add{Outcome: stop}
	}
	bounds, prev := pa.boundsHash(dp), &j.prev
	reset := !j.fresh && (h.count < prev.Count || bounds != prev.Bounds || restarted(prev, j.start) ||
		own && prev.Buckets != nil && !covers(pa.counts, prev.Buckets))
	add, done := pa.wholeOrBase(j.fresh, j.whole, reset, h, buckets, nil, fault)
	if !done {
		var diff []uint64
		if own && prev.Buckets != nil {
			pa.diff = subtractCounts(pa.diff[:0], pa.counts, prev.Buckets)
			diff = pa.diff
		}
		if own && diff == nil && fault == Fits {
			fault = faultNoPreviousBuckets
		}
		add = pa.distribution(h.less(prev), diff, nil, fault)
	}
	st := j.st
	st.Last, st.Start, st.Count, st.Value, st.Bounds = j.t, j.start, h.count, h.sum, bounds
	st.Buckets = nil
	if own {
		st.Buckets = append(prev.Buckets[:0], pa.counts...)
	}
	return add
}

// readCounts reads the explicit histogram point's bucket counts into pa.counts, once a point (the
// aggregations that take it share them; none changes them).
func (pa *Adder) readCounts(dp pmetric.HistogramDataPoint) {
	if !pa.countsRead {
		pa.counts = appendCounts(pa.counts[:0], dp.BucketCounts())
		pa.countsRead = true
	}
}

// boundsHash returns the hash of the explicit histogram point's bounds, computed once a point.
func (pa *Adder) boundsHash(dp pmetric.HistogramDataPoint) uint64 {
	if !pa.boundsHashed {
		pa.bounds, pa.boundsHashed = hashBounds(dp.ExplicitBounds()), true
	}
	return pa.bounds
}

// countsFault returns faultBucketCounts for an explicit histogram point whose bucket counts are not
// one more than its bounds (none of either is a point of count and sum alone): it breaks the data
// model.
func (pa *Adder) countsFault(dp pmetric.HistogramDataPoint) Fault {
	if n, b := len(pa.counts), dp.ExplicitBounds().Len(); n != b+1 && (n != 0 || b != 0) {
		return faultBucketCounts
	}
	return Fits
}

// boundsFault returns faultBounds for an explicit histogram point whose bounds are not finite and
// strictly ascending (it breaks the data model), else other; it looks at the bounds once a point.
func (pa *Adder) boundsFault(dp pmetric.HistogramDataPoint, other Fault) Fault {
	if !pa.faultRead {
		pa.faultRead, pa.fault = true, Fits
		prev := math.Inf(-1)
		for _, b := range dp.ExplicitBounds().All() {
			if !(b > prev) || math.IsInf(b, 1) { // NaN fails b > prev
				pa.fault = faultBounds
				break
			}
			prev = b
		}
	}
	if pa.fault != Fits {
		return pa.fault
	}
	return other
}

// exponentialFault returns what breaks the data model in the reader's exponential point, once a
// point: a scale outside [-10, 20], or an occupied bucket outside the indices of the finite floats at
// its scale (no histogram holds it, whatever its offset).
func (pa *Adder) exponentialFault(dp pmetric.ExponentialHistogramDataPoint) Fault {
	if pa.faultRead {
		return pa.fault
	}
	pa.faultRead, pa.fault = true, Fits
	lo, hi, ok := sketch.IndexRange(dp.Scale())
	switch {
	case !ok:
		pa.fault = faultScale
	case !occupiedWithin(dp.Positive(), lo, hi) || !occupiedWithin(dp.Negative(), lo, hi):
		pa.fault = faultIndices
	}
	return pa.fault
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

func (pa *Adder) AddExponential(p *Point, a *Target, in *Inputs) Add {
	dp := p.Exp
	h := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	fault := pa.exponentialFault(dp)
	var cur *sketch.Histogram
	switch {
	case fault.malformed():
	case a.Sketch:
		if cur = pa.pointSketch(dp); cur == nil {
			fault = faultNotAddingUp
		} else if a.Bounds != nil && a.Histogram {
			fault = faultOtherKind // percentiles take it, the explicit output does not
		}
	case a.Bounds != nil && a.Histogram:
		fault = faultOtherKind
	}
	if !p.Cumulative {
		return pa.distribution(h, nil, cur, fault)
	}
	j, stop := judge(p, a, in)
	if stop != Aggregated {
		return Add{Outcome: stop}
	}
	prev := &j.prev
	reset := !j.fresh && (h.count < prev.Count || restarted(prev, j.start))
	var inc *sketch.Histogram // the values added since prev
	if !j.fresh && !reset && cur != nil && prev.Hist != nil {
		inc = pa.scratchSketch()
		inc.CopyFrom(cur)
		inc.Downscale(prev.Hist.Scale())
		reset = !inc.Subtract(prev.Hist) // a bucket below its last count
	}
	add, done := pa.wholeOrBase(j.fresh, j.whole, reset, h, nil, cur, fault)
	if !done {
		if cur != nil && inc == nil && fault == Fits {
			fault = faultNoPreviousBuckets
		}
		add = pa.distribution(h.less(prev), nil, inc, fault)
	}
	st := j.st
	st.Last, st.Start, st.Count, st.Value = j.t, j.start, h.count, h.sum
	switch {
	case cur == nil:
		st.Hist = nil
	case st.Hist == nil:
		st.Hist = cur.Clone()
	default:
		st.Hist.CopyFrom(cur)
	}
	return add
}

// pointSketch returns exponential point dp as a sketch, imported once per point; nil for
// a point that no sketch holds (see exponentialFault) or whose buckets do not add up to its count. The
// sketch is the adder's until the batch is applied.
func (pa *Adder) pointSketch(dp pmetric.ExponentialHistogramDataPoint) *sketch.Histogram {
	if pa.imported {
		return pa.cur
	}
	pa.imported, pa.cur = true, nil
	pos, neg := dp.Positive(), dp.Negative()
	pa.counts = appendCounts(pa.counts[:0], pos.BucketCounts())
	pa.diff = appendCounts(pa.diff[:0], neg.BucketCounts())
	h := pa.scratchSketch()
	head := headOf(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
	if !h.SetExponential(dp.Scale(), dp.ZeroCount(), pos.Offset(), pa.counts, neg.Offset(), pa.diff, dp.Sum(),
		head.min, head.max, head.hasMinMax) || h.Count() != dp.Count() {
		return nil
	}
	pa.cur = h
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

// hashBounds hashes an explicit histogram's bounds; 0 for none.
func hashBounds(bounds pcommon.Float64Slice) uint64 {
	if bounds.Len() == 0 {
		return 0
	}
	var buf [8]byte
	var d xxhash.Digest
	d.Reset()
	for _, b := range bounds.All() {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(b))
		_, _ = d.Write(buf[:])
	}
	return d.Sum64() | 1
}
