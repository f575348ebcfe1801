package sketch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestInsertNEqualsRepeatedInserts: InsertN(v, n) leaves a histogram as n Inserts of v would, bucket
// for bucket (the reference counts each value n times at the scale the histogram ends at), across
// downscaling and counter widening up to 8 bytes, mixed with Insert, Merge and Subtract.
func TestInsertNEqualsRepeatedInserts(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	for iter := range 200 {
		vals := mixedValues(rng, 1+rng.IntN(500), 0.5+rng.Float64()*8)
		weights := make([]uint64, len(vals))
		for i := range weights {
			switch rng.IntN(10) {
			case 0:
				weights[i] = 1 + rng.Uint64N(1<<40) // past every counter width but the widest
			case 1, 2:
				weights[i] = 1 + rng.Uint64N(70000) // past one and two bytes
			default:
				weights[i] = 1 + rng.Uint64N(8)
			}
		}
		maxB := []int{minMaxBuckets, 16, 160, DefaultMaxBuckets}[rng.IntN(4)]
		h := New(int32(rng.IntN(12))-2, maxB)
		for i, v := range vals {
			if weights[i] == 1 && rng.IntN(2) == 0 {
				h.Insert(v)
			} else if !h.InsertN(v, weights[i]) {
				t.Fatalf("InsertN(%v, %d) refused", v, weights[i])
			}
		}
		if want := refScale(vals, h.initScale, maxB); h.Scale() != want {
			t.Fatalf("iter %d: scale %d, want %d", iter, h.Scale(), want)
		}
		checkAgainstWeightedRef(t, h, vals, weights)

		// Split into two weighted halves: their merge is the whole, and the whole less one half is
		// the other half.
		cut := len(vals) / 2
		a, b := New(h.initScale, maxB), New(h.initScale, maxB)
		for i, v := range vals {
			if i < cut {
				a.InsertN(v, weights[i])
			} else {
				b.InsertN(v, weights[i])
			}
		}
		a.Merge(b)
		checkAgainstWeightedRef(t, a, vals, weights)
		if h.Scale() == h.initScale && b.Scale() == h.initScale && h.Subtract(b) && cut > 0 {
			// Subtract keeps min and max (SetSummary corrects them): the half's, for the check.
			lo, hi := slices.Min(vals[:cut]), slices.Max(vals[:cut])
			h.SetSummary(h.Sum(), lo, hi)
			checkAgainstWeightedRef(t, h, vals[:cut], weights[:cut])
		}
	}
}

// TestInsertNQuantileIsWeightedNearestRank: the quantile of values inserted with counts is the
// nearest-rank quantile of the values each repeated its count times, within the sketch's error.
func TestInsertNQuantileIsWeightedNearestRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	for range 100 {
		vals := latency(rng, 1+rng.IntN(200), 1.5)
		var expanded []float64
		h := New(DefaultScale, DefaultMaxBuckets)
		for _, v := range vals {
			w := 1 + rng.Uint64N(20)
			h.InsertN(v, w)
			for range w {
				expanded = append(expanded, v)
			}
		}
		slices.Sort(expanded)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
			want, got := refQuantile(expanded, q), h.Quantile(q)
			if math.Abs(got-want) > 0.0055*want {
				t.Fatalf("q%v = %v, want %v (within 0.55%%)", q, got, want)
			}
		}
	}
}

func TestInsertNEdgeCases(t *testing.T) {
	h := New(DefaultScale, DefaultMaxBuckets)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if h.InsertN(v, 3) {
			t.Fatalf("InsertN(%v) accepted", v)
		}
	}
	if !h.InsertN(5, 0) || h.Count() != 0 || !math.IsNaN(h.Max()) {
		t.Fatalf("InsertN(5, 0) recorded something: count %d max %v", h.Count(), h.Max())
	}
	h.InsertN(0, 7)
	h.InsertN(math.Copysign(0, -1), 2)
	h.InsertN(math.SmallestNonzeroFloat64, 3) // subnormal: the index without the table's fast path
	if h.ZeroCount() != 9 || h.Count() != 12 {
		t.Fatalf("zero count %d count %d, want 9 and 12", h.ZeroCount(), h.Count())
	}
	checkAgainstWeightedRef(t, h, []float64{0, 0, math.SmallestNonzeroFloat64}, []uint64{7, 2, 3})
}
