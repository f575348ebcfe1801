package sketch

import (
	"math"
	"unsafe"
)

// Views of a histogram's internals for the tests: its dense bucket counts, the memory it holds, and
// a comparison of the data it holds.

// positiveOffset returns the index of the first non-empty positive bucket
// (0 when there is none), matching appendPositiveCounts.
func (h *Histogram) positiveOffset() int32 { return offsetOf(&h.pos) }

// negativeOffset returns the index of the first non-empty negative bucket
// (0 when there is none), matching appendNegativeCounts.
func (h *Histogram) negativeOffset() int32 { return offsetOf(&h.neg) }

func offsetOf(b *buckets) int32 {
	f, _, ok := b.usedRange()
	if !ok {
		return 0
	}
	return int32(f) + b.lo
}

// appendPositiveCounts appends the positive bucket counts from
// positiveOffset to the last non-empty bucket (the OpenTelemetry dense
// representation: first and last appended counts are non-zero).
func (h *Histogram) appendPositiveCounts(dst []uint64) []uint64 {
	return appendCounts(dst, &h.pos)
}

// appendNegativeCounts is appendPositiveCounts for the negative buckets
// (indexed by absolute value).
func (h *Histogram) appendNegativeCounts(dst []uint64) []uint64 {
	return appendCounts(dst, &h.neg)
}

// memoryBytes returns the heap bytes held by h: the struct plus the capacity
// of both bucket arrays. The shared, read-only index tables are not counted.
func (h *Histogram) memoryBytes() int {
	return int(unsafe.Sizeof(*h)) + cap(h.pos.data) + cap(h.neg.data)
}

// equal reports whether h and o hold the same data: scale, count, zero
// count, sum, min, max (bit for bit) and bucket counts. Configuration
// (initial scale, maxBuckets) and memory layout are not compared.
func (h *Histogram) equal(o *Histogram) bool {
	if h.scale != o.scale || h.count != o.count || h.zeroCount != o.zeroCount ||
		math.Float64bits(h.sum) != math.Float64bits(o.sum) ||
		math.Float64bits(h.Min()) != math.Float64bits(o.Min()) ||
		math.Float64bits(h.Max()) != math.Float64bits(o.Max()) {
		return false
	}
	return bucketsEqual(&h.pos, &o.pos) && bucketsEqual(&h.neg, &o.neg)
}

func bucketsEqual(a, b *buckets) bool {
	af, al, aok := a.indexRange()
	bf, bl, bok := b.indexRange()
	if aok != bok || af != bf || al != bl {
		return false
	}
	if !aok {
		return true
	}
	for i := af; i <= al; i++ {
		if a.get(i-int(a.lo)) != b.get(i-int(b.lo)) {
			return false
		}
	}
	return true
}
