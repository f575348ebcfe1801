package sketch

import (
	"math"
	"math/rand/v2"
	"testing"
)

// SetExponential rebuilds, bucket for bucket, a histogram exported as an OpenTelemetry point: at its
// scale, and downscaled when the receiving histogram's span is narrower.
func TestSetExponentialRebuildsTheExportedHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	for iter := range 200 {
		vals := mixedValues(rng, 1+rng.IntN(400), 0.5+rng.Float64()*6)
		src := fill(New(int32(rng.IntN(14))-4, DefaultMaxBuckets), vals)
		s := src.Scale()
		posOff, pos := src.AppendPositiveCountsAt(nil, s)
		negOff, neg := src.AppendNegativeCountsAt(nil, s)
		maxB := []int{DefaultMaxBuckets, 160, 16, minMaxBuckets}[rng.IntN(4)]
		h := New(DefaultScale, maxB)
		h.SetExponential(s, src.ZeroCount(), posOff, pos, negOff, neg, src.Sum(), src.Min(), src.Max(), true)
		if want := refScale(vals, s, maxB); h.Scale() != want {
			t.Fatalf("iter %d: scale %d, want %d (from %d, span %d)", iter, h.Scale(), want, s, maxB)
		}
		checkAgainstRef(t, h, vals)
	}
}

// Without min and max, the outermost occupied buckets' bounds stand in: every quantile lies within
// them, and so do the true min and max.
func TestSetExponentialWithoutMinMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 2))
	for range 100 {
		vals := mixedValues(rng, 1+rng.IntN(200), 3)
		src := fill(New(3, DefaultMaxBuckets), vals)
		posOff, pos := src.AppendPositiveCountsAt(nil, 3)
		negOff, neg := src.AppendNegativeCountsAt(nil, 3)
		h := New(DefaultScale, DefaultMaxBuckets)
		h.SetExponential(3, src.ZeroCount(), posOff, pos, negOff, neg, src.Sum(), 0, 0, false)
		if !(h.Min() <= src.Min() && h.Max() >= src.Max()) || math.IsInf(h.Min(), 0) || math.IsInf(h.Max(), 0) {
			t.Fatalf("min/max %v/%v do not enclose the values' %v/%v", h.Min(), h.Max(), src.Min(), src.Max())
		}
		for _, q := range []float64{0, 0.5, 0.99, 1} {
			if v := h.Quantile(q); !(v >= h.Min() && v <= h.Max()) {
				t.Fatalf("q%v = %v outside [%v, %v]", q, v, h.Min(), h.Max())
			}
		}
	}
	h := New(DefaultScale, DefaultMaxBuckets)
	h.SetExponential(0, 0, 0, nil, 0, nil, 0, 0, 0, false)
	if h.Count() != 0 {
		t.Fatalf("an empty point gave %d values", h.Count())
	}
}

// Downscale merges buckets exactly: the histogram equals the reference at the coarser scale; a finer
// target changes nothing.
func TestDownscaleToAScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	for range 100 {
		vals := mixedValues(rng, 1+rng.IntN(300), 4)
		h := fill(New(DefaultScale, DefaultMaxBuckets), vals)
		to := h.Scale() - int32(1+rng.IntN(8))
		h.Downscale(to)
		if h.Scale() != to {
			t.Fatalf("scale %d, want %d", h.Scale(), to)
		}
		checkAgainstRef(t, h, vals)
		h.Downscale(to + 2)
		if h.Scale() != to {
			t.Fatalf("a finer target moved the scale to %d", h.Scale())
		}
	}
}

// Without min and max, a point holding the greatest floats, whose bucket's upper bound is 2^1024,
// still gets finite bounds: a histogram holds no infinity, and it encodes and decodes.
func TestSetExponentialWithoutMinMaxAtTheEdgeOfTheFloats(t *testing.T) {
	for _, v := range []float64{math.MaxFloat64, -math.MaxFloat64} {
		src := New(DefaultScale, DefaultMaxBuckets)
		src.Insert(v)
		s := src.Scale()
		posOff, pos := src.AppendPositiveCountsAt(nil, s)
		negOff, neg := src.AppendNegativeCountsAt(nil, s)
		h := New(DefaultScale, DefaultMaxBuckets)
		h.SetExponential(s, 0, posOff, pos, negOff, neg, v, 0, 0, false)
		if math.IsInf(h.Min(), 0) || math.IsInf(h.Max(), 0) || !(h.Min() <= v && v <= h.Max()) {
			t.Fatalf("%g: min/max %v/%v", v, h.Min(), h.Max())
		}
		var back Histogram
		if _, err := back.UnmarshalBinary(h.AppendBinary(nil)); err != nil {
			t.Fatalf("%g: %v", v, err)
		}
	}
}
