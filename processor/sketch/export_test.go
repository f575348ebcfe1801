package sketch

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Exported counts at a coarser scale, against a brute force over the inserted values: each value's
// bucket at scale s is ceil(log2(|v|) * 2^s) - 1, counted directly.
func TestAppendCountsAtMatchesBruteForce(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 5))
		h := New(DefaultScale, DefaultMaxBuckets)
		var vals []float64
		spread := 0.5 + 6*rng.Float64()
		for range 1 + rng.IntN(300) {
			v := math.Exp(spread * rng.NormFloat64())
			if rng.IntN(5) == 0 {
				v = -v
			}
			if rng.IntN(40) == 0 {
				v = 0
			}
			h.Insert(v)
			vals = append(vals, v)
		}
		for _, maxBuckets := range []int{1, 2, 7, 160, 4096} {
			s := h.ScaleFor(maxBuckets)
			for _, positive := range []bool{true, false} {
				var off int32
				var got []uint64
				if positive {
					off, got = h.AppendPositiveCountsAt(nil, s)
				} else {
					off, got = h.AppendNegativeCountsAt(nil, s)
				}
				want := map[int]uint64{}
				for _, v := range vals {
					if v == 0 || (v > 0) != positive {
						continue
					}
					want[refIndex(v, s)]++
				}
				total := uint64(0)
				for i, c := range got {
					if c != want[int(off)+i] {
						t.Fatalf("seed %d max %d scale %d positive=%v: bucket %d has %d, want %d", seed, maxBuckets, s, positive, int(off)+i, c, want[int(off)+i])
					}
					total += c
				}
				n := uint64(0)
				for _, c := range want {
					n += c
				}
				if total != n {
					t.Fatalf("seed %d max %d positive=%v: exported %d values, want %d", seed, maxBuckets, positive, total, n)
				}
				if len(got) > maxBuckets && s > MinScale {
					t.Fatalf("seed %d: %d buckets at scale %d, max %d", seed, len(got), s, maxBuckets)
				}
				if len(got) > 0 && (got[0] == 0 || got[len(got)-1] == 0) {
					t.Fatalf("seed %d: exported range not trimmed: %v", seed, got)
				}
			}
			// The finest such scale: one finer would not fit.
			if s < h.Scale() {
				if fits(h, s+1, maxBuckets) {
					t.Fatalf("seed %d max %d: ScaleFor = %d, but %d fits", seed, maxBuckets, s, s+1)
				}
			}
		}
	}
}

func fits(h *Histogram, s int32, maxBuckets int) bool {
	_, p := h.AppendPositiveCountsAt(nil, s)
	_, n := h.AppendNegativeCountsAt(nil, s)
	return len(p) <= maxBuckets && len(n) <= maxBuckets
}
