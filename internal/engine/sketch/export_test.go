package sketch

import (
	"math"
	"math/rand/v2"
	"slices"
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
				if len(got) > maxBuckets && s > minScale {
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

// Contiguous runs of buckets, each holding a chosen count, exported at every coarser scale from 1 to
// 6 steps down: runs that start at every offset from an aligned group of eight, below and above
// index 0; counters of 255 in every byte of a word (the parallel byte sums must not carry between
// lanes); counters that widen to 2 and 4 bytes. The output is appended to a slice whose spare
// capacity holds stale counts, as the metrics builder reuses its buffer. Against the counts summed
// by hand per coarse bucket.
func TestAppendCountsAtDenseRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wlog  uint8
		count func(rng *rand.Rand) int
	}{
		{"sparse", 0, func(rng *rand.Rand) int { return max(0, rng.IntN(6)-3) }},
		{"full bytes", 0, func(rng *rand.Rand) int { return 255 }},
		{"random bytes", 0, func(rng *rand.Rand) int { return rng.IntN(256) }},
		{"two-byte counters", 1, func(rng *rand.Rand) int { return 256 + rng.IntN(300) }},
		{"four-byte counters", 2, func(rng *rand.Rand) int { return rng.IntN(3) * 40000 }},
	} {
		for _, group := range []int{-3, 2} {
			for align := range 8 {
				rng := rand.New(rand.NewPCG(uint64(group+10), uint64(align)))
				n := 1 + rng.IntN(70)
				h := New(DefaultScale, DefaultMaxBuckets)
				fine := map[int]uint64{} // count per bucket at scale 6
				for i := range n {
					idx := group*8 + align + i // a bucket at scale 6
					c := tc.count(rng)
					if i == 0 || i == n-1 {
						c = max(c, 1) // the run's ends hold values
					}
					v := math.Exp2((float64(idx) + 0.5) / 64) // the middle of bucket idx
					if refIndex(v, DefaultScale) != idx {
						t.Fatalf("value %g is not in bucket %d", v, idx)
					}
					for range c {
						if !h.Insert(v) {
							t.Fatal("insert refused")
						}
					}
					fine[idx] += uint64(c)
				}
				if h.Scale() != DefaultScale {
					t.Fatalf("%s: the sketch downscaled to %d", tc.name, h.Scale())
				}
				if h.pos.wlog != tc.wlog {
					t.Fatalf("%s: counters of %d bytes, want %d", tc.name, 1<<h.pos.wlog, 1<<tc.wlog)
				}
				for k := int32(1); k <= 6; k++ {
					coarse := map[int]uint64{}
					for i, c := range fine {
						coarse[i>>k] += c
					}
					lo, want := dense(coarse) // the run's ends hold values: so do the first and last buckets
					buf := make([]uint64, 200)
					for i := range buf {
						buf[i] = 9 // stale counts past the slice's length, below
					}
					buf = buf[:1]
					buf[0] = 7
					off, got := h.AppendPositiveCountsAt(buf, DefaultScale-k) // appends after what is there
					if got[0] != 7 {
						t.Fatalf("%s group %d align %d k %d: the slice's first element changed", tc.name, group, align, k)
					}
					got = got[1:]
					if off != lo || !slices.Equal(got, want) {
						t.Fatalf("%s group %d align %d k %d: offset %d buckets %v, want %d %v", tc.name, group, align, k, off, got, lo, want)
					}
				}
			}
		}
	}
}
