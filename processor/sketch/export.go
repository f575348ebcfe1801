package sketch

// Exporting a histogram with at most a given number of buckets per sign, at the finest scale that
// allows it: what an OpenTelemetry SDK does with its max_size (160 by default), so that a consumer
// gets a histogram of the size it expects while the sketch itself keeps its finer scale for
// quantiles.

// ScaleFor returns the finest scale, at most h's, at which the occupied buckets of each sign span at
// most maxBuckets indices (and at least MinScale).
func (h *Histogram) ScaleFor(maxBuckets int) int32 {
	maxBuckets = max(maxBuckets, 1)
	k := int32(0)
	for _, b := range []*buckets{&h.pos, &h.neg} {
		lo, hi, ok := b.indexRange()
		if !ok {
			continue
		}
		for h.scale-k > MinScale && spanAt(lo, hi, uint(k)) > maxBuckets {
			k++
		}
	}
	return h.scale - k
}

// AppendPositiveCountsAt appends the positive bucket counts at scale s (at most Scale()) from the
// first to the last occupied bucket, and returns the index of the first (0 when none is occupied):
// the Offset and BucketCounts of an OTLP exponential histogram at scale s.
func (h *Histogram) AppendPositiveCountsAt(dst []uint64, s int32) (int32, []uint64) {
	return appendCountsAt(dst, &h.pos, h.scale-s)
}

// AppendNegativeCountsAt is AppendPositiveCountsAt for the negative buckets.
func (h *Histogram) AppendNegativeCountsAt(dst []uint64, s int32) (int32, []uint64) {
	return appendCountsAt(dst, &h.neg, h.scale-s)
}

// appendCountsAt merges every 2^k adjacent buckets of b: index i becomes i>>k (floor division, so
// that bucket (base^i, base^(i+1)] lands in the coarser bucket that contains it).
func appendCountsAt(dst []uint64, b *buckets, k int32) (int32, []uint64) {
	f, l, ok := b.usedRange()
	if !ok {
		return 0, dst
	}
	if k <= 0 {
		return int32(f) + b.lo, appendCounts(dst, b)
	}
	first := (int(b.lo) + f) >> k
	n := len(dst)
	for s := f; s <= l; s++ {
		c := b.get(s)
		if c == 0 {
			continue
		}
		j := n + ((int(b.lo)+s)>>k - first)
		for len(dst) <= j {
			dst = append(dst, 0)
		}
		dst[j] += c
	}
	return int32(first), dst
}
