package sketch

import "math"

// Importing an OpenTelemetry exponential histogram data point, and bringing a histogram to a
// coarser scale: what aggregating exponential histograms from metric inputs needs, where the sketch
// takes a whole distribution at once instead of values one by one.

// SetExponential makes h the histogram of an OpenTelemetry exponential histogram data point at scale
// (clamped to the sketch's range, downscaling what does not fit h's maximum span): zeroCount zeros,
// posCounts[k] values in bucket posOffset+k and negCounts[k] in negative bucket negOffset+k (bucket
// i holding (base^i, base^(i+1)], as in OpenTelemetry), adding up to sum. With hasMinMax, minV and
// maxV are the values' least and greatest; without, the bounds of the outermost occupied buckets stand
// in for them, so that quantiles stay within the buckets. h keeps its maximum span.
func (h *Histogram) SetExponential(scale int32, zeroCount uint64, posOffset int32, posCounts []uint64,
	negOffset int32, negCounts []uint64, sum, minV, maxV float64, hasMinMax bool) {
	h.configure(scale, int(h.maxBuckets))
	h.Reset()
	var n uint64
	for _, side := range []struct {
		b      *buckets
		offset int32
		counts []uint64
	}{{&h.pos, posOffset, posCounts}, {&h.neg, negOffset, negCounts}} {
		for k, c := range side.counts {
			if c == 0 {
				continue
			}
			n += c
			// A downscale meanwhile shifts the index as it shifted the buckets already in.
			h.insertSlow(side.b, (int(side.offset)+k)>>(uint(h.initScale-h.scale)), c)
		}
	}
	h.zeroCount = zeroCount
	h.count = n + zeroCount
	h.sum = sum
	if h.count == 0 {
		return
	}
	if hasMinMax {
		h.min, h.max = minV, maxV
		return
	}
	h.min, h.max = h.outerBounds()
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
