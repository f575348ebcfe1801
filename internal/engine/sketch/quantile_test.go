package sketch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// harmonicMid is 2LU/(L+U) for the bucket (2^a, 2^b], computed as 2L/(1 + L/U) = 2^(a+1)/(1 +
// 2^(a-b)): a formula of its own, with no logarithm, independent of the estimator's log-space one,
// and finite for a lower bound below float64's normal range (a bucket at scale -10 reaches 2^-1024).
func harmonicMid(a, b float64) float64 { return math.Exp2(a+1) / (1 + math.Exp2(a-b)) }

// TestBucketMidEveryScale checks the bucket midpoint at every scale a histogram can be at (each entry
// of midLog2) against harmonicMid, for buckets from about 2^-1000 (2^-1024 at scales -9 and -10) to
// 2^1000.
func TestBucketMidEveryScale(t *testing.T) {
	for s := minScale; s <= maxScale; s++ {
		h := New(s, DefaultMaxBuckets)
		if h.Scale() != s {
			t.Fatalf("New(%d) has scale %d", s, h.Scale())
		}
		width := math.Ldexp(1, -int(s)) // of a bucket, in octaves
		checked := 0
		for _, octaves := range []float64{-1000, -37.5, -1, 0, 0.3, 1, 2.7, 100, 1000} {
			i := int(math.Floor(octaves / width))
			a, b := float64(i)*width, float64(i+1)*width
			if a < -1024 || a > 1000 {
				continue
			}
			want, got := harmonicMid(a, b), h.bucketMid(i)
			if math.Abs(got-want) > 1e-12*want {
				t.Errorf("scale %d bucket %d: got %v want %v", s, i, got, want)
			}
			checked++
		}
		if checked == 0 {
			t.Fatalf("scale %d: no bucket checked", s)
		}
	}
}

// TestQuantileEveryRankEveryWidth asks for every rank of sketches at the table's scales and at
// negative ones, with values of either sign and zeros spread over more than one chunk of 64 counters,
// and compares with the documented estimator computed from refIndex's buckets and harmonicMid. It
// asks again with the counters widened to 2, 4 and 8 bytes: every counter width, and both directions
// of the walk on both signs, must give the same answers.
func TestQuantileEveryRankEveryWidth(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range []int32{minScale, -7, -3, -1, 0, 1, 2, 3, 5, 8, maxTableScale} {
		for _, negShare := range []float64{0, 0.2, 0.5, 0.8, 1} {
			t.Run(fmt.Sprintf("scale=%d/neg=%v", s, negShare), func(t *testing.T) {
				width := math.Ldexp(1, -int(s))
				// About 200 buckets per sign where the range allows (fewer at negative scales,
				// whose buckets are wider than float64's range allows 200 of).
				span := min(200*width, 1800)
				var vals []float64
				for range 300 {
					switch u := rng.Float64(); {
					case u < 0.03:
						vals = append(vals, 0)
					case u < 0.03+0.97*negShare:
						vals = append(vals, -math.Exp2((rng.Float64()-0.5)*span))
					default:
						vals = append(vals, math.Exp2((rng.Float64()-0.5)*span))
					}
				}
				h := fill(New(s, 4096), vals)
				if h.Scale() != s {
					t.Fatalf("scale moved to %d", h.Scale())
				}
				want := referenceQuantiles(vals, s)
				for {
					for k, w := range want {
						q := (float64(k) + 0.5) / float64(len(vals))
						if got := h.Quantile(q); math.Abs(got-w) > 1e-12*math.Abs(w) {
							t.Fatalf("width %d bytes, rank %d of %d: got %v want %v",
								1<<h.pos.wlog, k, len(vals), got, w)
						}
					}
					if h.pos.wlog == 3 {
						break
					}
					h.pos.widen()
					h.neg.widen()
				}
			})
		}
	}
}

// referenceQuantiles returns the estimate of every rank 0..len(vals)-1: the sorted reference buckets
// (most negative first, zeros, positive ascending), each rank's bucket's harmonicMid (negated below
// zero, 0 for zeros), clamped to the values' min and max.
func referenceQuantiles(vals []float64, s int32) []float64 {
	r := newRef(vals, s)
	width := math.Ldexp(1, -int(s))
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	var out []float64
	emit := func(v float64, c uint64) {
		for range c {
			out = append(out, min(max(v, lo), hi))
		}
	}
	no, nc := dense(r.neg)
	for j := len(nc) - 1; j >= 0; j-- {
		i := float64(int(no) + j)
		emit(-harmonicMid(i*width, (i+1)*width), nc[j])
	}
	emit(0, r.zero)
	po, pc := dense(r.pos)
	for j, c := range pc {
		i := float64(int(po) + j)
		emit(harmonicMid(i*width, (i+1)*width), c)
	}
	return out
}
