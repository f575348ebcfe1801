package sketch

import (
	"math"
	"testing"
)

// What a client can put in an exponential point that no histogram holds, and counts too large for a
// uint64: refused or saturated, never a hang, a wrap or a panic.

// An occupied bucket outside the finite floats at the point's scale, or a scale outside [-10, 20], is
// refused and leaves the histogram empty; the extreme indices that do hold floats are taken.
func TestSetExponentialRefusesWhatNoHistogramHolds(t *testing.T) {
	for _, c := range []struct {
		name           string
		scale          int32
		offset         int32
		counts         []uint64
		negative, want bool
	}{
		{"offset -2^31", 0, math.MinInt32, []uint64{1}, false, false},
		{"offset -2^31, negative side", 0, math.MinInt32, []uint64{1}, true, false},
		{"offset 2^31-1", 0, math.MaxInt32, []uint64{1}, false, false},
		{"offset 2^31-1 and a second bucket past int32", 20, math.MaxInt32, []uint64{1, 1}, false, false},
		{"offset 10^7 at scale 0", 0, 10_000_000, []uint64{1}, false, false},
		{"one past the greatest float at scale 0", 0, 1024, []uint64{1}, false, false},
		{"one below the least subnormal at scale 0", 0, -1076, []uint64{1}, false, false},
		{"scale 21", 21, 0, []uint64{1}, false, false},
		{"scale -11", -11, 0, []uint64{1}, false, false},
		{"the greatest float at scale 0", 0, 1023, []uint64{1}, false, true},
		{"the least subnormal at scale 0", 0, -1075, []uint64{1}, false, true},
		{"the greatest float at scale 20", 20, 1024<<20 - 1, []uint64{1}, false, true},
		{"the least subnormal at scale 20", 20, -1074<<20 - 1, []uint64{1}, true, true},
		{"the greatest float at scale -10", -10, 0, []uint64{1}, false, true},
		// Zero counts are no buckets: only occupied ones must hold floats.
		{"zeros outside, a count inside", 0, -1077, []uint64{0, 0, 3}, false, true},
	} {
		h := New(DefaultScale, DefaultMaxBuckets)
		h.Insert(5) // SetExponential replaces what was there, refused or not
		var ok bool
		if c.negative {
			ok = h.SetExponential(c.scale, 0, 0, nil, c.offset, c.counts, -1, 0, 0, false)
		} else {
			ok = h.SetExponential(c.scale, 0, c.offset, c.counts, 0, nil, 1, 0, 0, false)
		}
		if ok != c.want {
			t.Errorf("%s: taken %v, want %v", c.name, ok, c.want)
			continue
		}
		if !ok {
			if h.Count() != 0 {
				t.Errorf("%s: refused, but holds %d values", c.name, h.Count())
			}
			continue
		}
		if h.Count() != sumU(c.counts) || math.IsInf(h.Min(), 0) || math.IsInf(h.Max(), 0) || math.IsNaN(h.Quantile(0.5)) {
			t.Errorf("%s: count %d, min %v, max %v, median %v", c.name, h.Count(), h.Min(), h.Max(), h.Quantile(0.5))
		}
	}
}

// Counts adding up past 2^64 - 1 cannot be the point's count: refused.
func TestSetExponentialRefusesCountsThatOverflow(t *testing.T) {
	h := New(DefaultScale, DefaultMaxBuckets)
	if h.SetExponential(0, 1, 0, []uint64{math.MaxUint64}, 0, nil, 1, 0, 0, false) {
		t.Fatalf("a zero count and a bucket of 2^64-1 taken: count %d", h.Count())
	}
	if h.SetExponential(0, 0, 0, []uint64{1 << 63}, 0, []uint64{1 << 63}, 1, 0, 0, false) {
		t.Fatalf("two buckets of 2^63 taken: count %d", h.Count())
	}
	if !h.SetExponential(0, 0, 0, []uint64{1 << 63}, 0, []uint64{1<<63 - 1}, 1, 0, 0, false) || h.Count() != math.MaxUint64 {
		t.Fatalf("2^63 + 2^63-1: count %d", h.Count())
	}
}

// The points furthest apart that a histogram holds, merged: the merge downscales to a scale where
// both fit within the span, at the cost of their buckets, and keeps every value.
func TestMergeOfTheFurthestPoints(t *testing.T) {
	for _, scale := range []int32{20, 6, 0, -10} {
		lo, hi, _ := IndexRange(scale)
		a, b := New(DefaultScale, 160), New(DefaultScale, 160)
		if !a.SetExponential(scale, 0, int32(lo), []uint64{2}, 0, nil, 0, 0, 0, false) ||
			!b.SetExponential(scale, 0, int32(hi), []uint64{3}, int32(hi), []uint64{4}, 0, 0, 0, false) {
			t.Fatalf("scale %d: extreme points refused", scale)
		}
		a.Merge(b)
		posOff, pos := a.AppendPositiveCountsAt(nil, a.Scale())
		_, neg := a.AppendNegativeCountsAt(nil, a.Scale())
		if a.Count() != 9 || sumU(pos) != 5 || sumU(neg) != 4 || len(pos) > 160 || a.Scale() < minScale {
			t.Fatalf("scale %d: merged to scale %d, count %d, positive %v at %d, negative %v", scale, a.Scale(), a.Count(), pos, posOff, neg)
		}
	}
}

// Counts saturate at 2^64 - 1, in every path that adds them: a histogram does not wrap to a small
// count, and a saturated one still encodes and decodes.
func TestCountsSaturate(t *testing.T) {
	big := withCount(10, math.MaxUint64-1)
	big.Insert(10)
	big.Insert(10)
	big.Insert(0)
	big.Insert(0)
	if big.Count() != math.MaxUint64 || big.appendPositiveCounts(nil)[0] != math.MaxUint64 {
		t.Fatalf("Insert past 2^64-1: count %d, bucket %v", big.Count(), big.appendPositiveCounts(nil))
	}
	n := New(DefaultScale, DefaultMaxBuckets)
	n.InsertN(10, math.MaxUint64)
	n.InsertN(10, 7)
	n.InsertN(0, math.MaxUint64)
	n.InsertN(0, 1)
	if n.Count() != math.MaxUint64 || n.ZeroCount() != math.MaxUint64 || n.appendPositiveCounts(nil)[0] != math.MaxUint64 {
		t.Fatalf("InsertN past 2^64-1: count %d, zeros %d, bucket %v", n.Count(), n.ZeroCount(), n.appendPositiveCounts(nil))
	}
	m := withCount(10, 1<<63)
	m.Merge(withCount(10, 1<<63))
	m.Merge(withCount(10.5, 5)) // another bucket, at the same scale
	if m.Count() != math.MaxUint64 || m.appendPositiveCounts(nil)[0] != math.MaxUint64 {
		t.Fatalf("Merge past 2^64-1: count %d, counts %v", m.Count(), m.appendPositiveCounts(nil))
	}
	// Downscaling merges two saturated neighbours into one saturated bucket.
	m.Downscale(m.Scale() - 4)
	if got := m.appendPositiveCounts(nil); got[0] != math.MaxUint64 {
		t.Fatalf("Downscale of saturated buckets: %v", got)
	}
	// Exported at a coarser scale, saturated buckets stay saturated.
	if _, got := m.AppendPositiveCountsAt(nil, m.Scale()-3); got[0] != math.MaxUint64 {
		t.Fatalf("exported at a coarser scale: %v", got)
	}
	// A saturated count cannot be taken apart again.
	if m.Subtract(withCount(10, 5)) {
		t.Fatal("Subtract from a saturated histogram reported exact")
	}
	var back Histogram
	if _, err := back.UnmarshalBinary(m.AppendBinary(nil)); err != nil || back.Count() != math.MaxUint64 {
		t.Fatalf("a saturated histogram does not decode: %v (count %d)", err, back.Count())
	}
}
