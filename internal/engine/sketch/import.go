package sketch

import "math"

// Importing an OpenTelemetry exponential histogram data point, and bringing a histogram to a
// coarser scale: what aggregating exponential histograms from metric inputs needs, where the sketch
// takes a whole distribution at once instead of values one by one.

// SetExponential makes h the histogram of an OpenTelemetry exponential histogram data point at scale
// (downscaling what does not fit h's maximum span): zeroCount zeros, posCounts[k] values in bucket
// posOffset+k and negCounts[k] in negative bucket negOffset+k (bucket i holding (base^i, base^(i+1)],
// as in OpenTelemetry), adding up to sum. With hasMinMax, minV and maxV are the values' least and
// greatest; without, the bounds of the outermost occupied buckets stand in for them, so that quantiles
// stay within the buckets. h keeps its maximum span.
//
// It reports false, leaving h empty, for a point that no histogram holds: a scale outside [-10, 20],
// an occupied bucket outside the indices of the finite floats at that scale (IndexRange), or counts
// whose total does not fit in a uint64. Its work is linear in the number of counts, whatever the
// offsets: an index is checked before a bucket is made for it.
func (h *Histogram) SetExponential(scale int32, zeroCount uint64, posOffset int32, posCounts []uint64,
	negOffset int32, negCounts []uint64, sum, minV, maxV float64, hasMinMax bool) bool {
	h.configure(scale, int(h.maxBuckets))
	h.Reset()
	lo, hi, ok := IndexRange(scale)
	if !ok || !within(posOffset, posCounts, lo, hi) || !within(negOffset, negCounts, lo, hi) {
		return false
	}
	n := zeroCount
	for _, side := range []struct {
		b      *buckets
		offset int32
		counts []uint64
	}{{&h.pos, posOffset, posCounts}, {&h.neg, negOffset, negCounts}} {
		for k, c := range side.counts {
			if c == 0 {
				continue
			}
			if n+c < n {
				h.Reset()
				return false
			}
			n += c
			// A downscale meanwhile shifts the index as it shifted the buckets already in.
			h.insertSlow(side.b, (int(side.offset)+k)>>(uint(h.initScale-h.scale)), c)
		}
	}
	h.zeroCount = zeroCount
	h.count = n
	h.sum = sum
	if h.count == 0 {
		return true
	}
	if hasMinMax {
		h.min, h.max = minV, maxV
		return true
	}
	h.min, h.max = h.outerBounds()
	return true
}

// IndexRange returns the bucket indices that hold finite non-zero floats at scale: those of the
// least subnormal and of the greatest float64. ok is false for a scale outside [-10, 20], the
// OpenTelemetry range.
func IndexRange(scale int32) (lo, hi int, ok bool) {
	if scale < minScale || scale > maxScale {
		return 0, 0, false
	}
	return minIndex(scale), maxIndex(scale), true
}

// within reports whether the occupied buckets among counts, the first at index offset, lie in
// [lo, hi].
func within(offset int32, counts []uint64, lo, hi int) bool {
	if len(counts) == 0 {
		return true
	}
	if first, last := int(offset), int(offset)+len(counts)-1; first >= lo && last <= hi {
		return true
	}
	for k, c := range counts {
		if i := int(offset) + k; c != 0 && (i < lo || i > hi) {
			return false
		}
	}
	return true
}

// outerBounds returns the lower bound of the lowest occupied bucket and the upper bound of the
// highest, counting the zero bucket as 0, within the finite floats (the bound of the bucket of the
// greatest floats is 2^1024).
func (h *Histogram) outerBounds() (lo, hi float64) {
	lo, hi = h.bucketBounds()
	return max(lo, -math.MaxFloat64), min(hi, math.MaxFloat64)
}

func (h *Histogram) bucketBounds() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	if h.zeroCount > 0 {
		lo, hi = 0, 0
	}
	if l, u, ok := h.pos.indexRange(); ok {
		lo = min(lo, math.Exp2(lowerBoundLog2(l, h.scale)))
		hi = max(hi, math.Exp2(lowerBoundLog2(u+1, h.scale)))
	}
	if l, u, ok := h.neg.indexRange(); ok {
		lo = min(lo, -math.Exp2(lowerBoundLog2(u+1, h.scale)))
		hi = max(hi, -math.Exp2(lowerBoundLog2(l, h.scale)))
	}
	return lo, hi
}

// Downscale brings h to scale s, if it is finer: every 2^(Scale()-s) adjacent buckets merged into
// one, exactly. A coarser or equal s changes nothing.
func (h *Histogram) Downscale(s int32) {
	if s < h.scale {
		h.downscale(uint(h.scale - max(s, minScale)))
	}
}

// Clone returns a copy of h.
func (h *Histogram) Clone() *Histogram { return h.clone() }
