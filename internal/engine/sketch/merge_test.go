package sketch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// mixedValues returns n values of both signs and zeros, log-spread by spread.
func mixedValues(rng *rand.Rand, n int, spread float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		v := math.Exp(rng.NormFloat64() * spread)
		switch rng.IntN(8) {
		case 0:
			v = 0
		case 1, 2:
			v = -v
		}
		out[i] = v
	}
	return out
}

// split partitions vals into k random parts.
func split(rng *rand.Rand, vals []float64, k int) [][]float64 {
	parts := make([][]float64, k)
	for _, v := range vals {
		j := rng.IntN(k)
		parts[j] = append(parts[j], v)
	}
	return parts
}

func TestMergeEqualsUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for iter := 0; iter < 80; iter++ {
		vals := mixedValues(rng, 1+rng.IntN(2000), 0.5+rng.Float64()*6)
		maxB := []int{minMaxBuckets, 16, 100, DefaultMaxBuckets}[rng.IntN(4)]
		k := 1 + rng.IntN(6)
		parts := split(rng, vals, k)
		// Parts at different initial scales: merge must go to the coarsest.
		scales := make([]int32, k)
		minInit := int32(99)
		for i := range scales {
			scales[i] = int32(rng.IntN(10)) - 1
			minInit = min(minInit, scales[i])
		}
		hs := make([]*Histogram, k)
		for i, p := range parts {
			hs[i] = fill(New(scales[i], maxB), p)
		}
		acc := New(scales[0], maxB)
		for _, i := range rng.Perm(k) {
			acc.Merge(hs[i])
		}
		// The union histogram at the coarsest initial scale ends at the
		// scale that the reference says, and so must the merge.
		want := refScale(vals, minInit, maxB)
		if acc.Scale() != want {
			t.Fatalf("iter %d: merged scale %d, want %d", iter, acc.Scale(), want)
		}
		checkAgainstRef(t, acc, vals)
		union := fill(New(minInit, maxB), vals)
		if union.Scale() != want {
			t.Fatalf("iter %d: union scale %d, want %d", iter, union.Scale(), want)
		}
		if !slices.Equal(acc.appendPositiveCounts(nil), union.appendPositiveCounts(nil)) ||
			!slices.Equal(acc.appendNegativeCounts(nil), union.appendNegativeCounts(nil)) ||
			acc.positiveOffset() != union.positiveOffset() || acc.negativeOffset() != union.negativeOffset() {
			t.Fatalf("iter %d: merged buckets differ from the union's", iter)
		}
		// Merging never modifies the argument.
		for i, p := range parts {
			checkAgainstRef(t, hs[i], p)
		}
	}
}

func TestMergeAssociativeCommutative(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for iter := 0; iter < 40; iter++ {
		maxB := []int{8, 64, DefaultMaxBuckets}[rng.IntN(3)]
		a := fill(New(int32(rng.IntN(8)), maxB), mixedValues(rng, rng.IntN(500), 3))
		b := fill(New(int32(rng.IntN(8)), maxB), mixedValues(rng, rng.IntN(500), 1))
		c := fill(New(int32(rng.IntN(8)), maxB), mixedValues(rng, rng.IntN(500), 5))
		ab := a.clone()
		ab.Merge(b)
		abc1 := ab.clone()
		abc1.Merge(c) // (a+b)+c
		bc := b.clone()
		bc.Merge(c)
		abc2 := a.clone()
		abc2.Merge(bc) // a+(b+c)
		abc3 := c.clone()
		abc3.Merge(b)
		abc3.Merge(a) // (c+b)+a
		for _, x := range []*Histogram{abc2, abc3} {
			if x.Scale() != abc1.Scale() || x.Count() != abc1.Count() || x.ZeroCount() != abc1.ZeroCount() ||
				x.Min() != abc1.Min() || x.Max() != abc1.Max() ||
				x.positiveOffset() != abc1.positiveOffset() || x.negativeOffset() != abc1.negativeOffset() ||
				!slices.Equal(x.appendPositiveCounts(nil), abc1.appendPositiveCounts(nil)) ||
				!slices.Equal(x.appendNegativeCounts(nil), abc1.appendNegativeCounts(nil)) {
				t.Fatalf("iter %d: merge order changes the result", iter)
			}
		}
	}
}

func TestMergeEdgeCases(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	vals := mixedValues(rng, 500, 2)
	h := fill(New(DefaultScale, DefaultMaxBuckets), vals)

	// Empty argument: no change, not even of scale.
	before := h.clone()
	h.Merge(New(-5, minMaxBuckets))
	h.Merge(nil)
	if !h.equal(before) {
		t.Fatal("merging an empty histogram changed the receiver")
	}

	// Into an empty receiver.
	e := New(DefaultScale, DefaultMaxBuckets)
	e.Merge(h)
	checkAgainstRef(t, e, vals)

	// Self-merge doubles every count.
	h.Merge(h)
	checkAgainstRef(t, h, append(slices.Clone(vals), vals...))

	// A coarser argument downscales the receiver; the argument is untouched.
	coarse := fill(New(2, DefaultMaxBuckets), []float64{3, -3})
	r := fill(New(DefaultScale, DefaultMaxBuckets), vals)
	r.Merge(coarse)
	if r.Scale() != 2 || coarse.Scale() != 2 {
		t.Fatalf("scales %d %d", r.Scale(), coarse.Scale())
	}
	checkAgainstRef(t, r, append(slices.Clone(vals), 3, -3))

	// A finer argument is mapped onto the receiver's coarser scale.
	fine := fill(New(10, DefaultMaxBuckets), vals)
	c2 := fill(New(1, DefaultMaxBuckets), []float64{7})
	c2.Merge(fine)
	if c2.Scale() != 1 || fine.Scale() != refScale(vals, 10, DefaultMaxBuckets) || fine.Scale() <= 1 {
		t.Fatalf("scales %d %d", c2.Scale(), fine.Scale())
	}
	checkAgainstRef(t, c2, append([]float64{7}, vals...))
	checkAgainstRef(t, fine, vals)
}

func TestMergeByteOverflow(t *testing.T) {
	// Same-scale byte counters whose sums overflow in the middle of the run.
	a := New(DefaultScale, DefaultMaxBuckets)
	b := New(DefaultScale, DefaultMaxBuckets)
	var vals []float64
	for i := 0; i < 20; i++ {
		v := 1 + float64(i)/50
		for range 100 + 10*i {
			a.Insert(v)
			b.Insert(v)
			vals = append(vals, v, v)
		}
	}
	a.Merge(b)
	checkAgainstRef(t, a, vals)
	if a.pos.wlog != 1 {
		t.Fatalf("width %d", 1<<a.pos.wlog)
	}
}
