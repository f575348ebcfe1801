package sketch

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSubtractUndoesMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		a, b := New(DefaultScale, []int{16, 300, DefaultMaxBuckets}[trial%3]), New(DefaultScale, DefaultMaxBuckets)
		var av, bv []float64
		for range rng.IntN(300) {
			v := math.Exp(rng.NormFloat64()*3) * float64(1-2*rng.IntN(2))
			if rng.IntN(10) == 0 {
				v = 0
			}
			av = append(av, v)
		}
		for range 1 + rng.IntN(300) {
			bv = append(bv, math.Exp(rng.NormFloat64()*2+1))
		}
		for _, v := range av {
			a.Insert(v)
		}
		for _, v := range bv {
			b.Insert(v)
		}
		acc := a.clone()
		acc.Merge(b)
		merged := acc.Scale()
		if !acc.Subtract(b) {
			t.Fatalf("trial %d: could not subtract what was merged", trial)
		}
		// The remainder holds exactly a's values, at the scale the merge reached.
		zeros := 0
		for _, v := range av {
			if v == 0 {
				zeros++
			}
		}
		if acc.Count() != uint64(len(av)) || acc.ZeroCount() != uint64(zeros) {
			t.Fatalf("trial %d: count %d zero %d, want %d %d", trial, acc.Count(), acc.ZeroCount(), len(av), zeros)
		}
		if len(av) == 0 {
			if acc.Scale() != DefaultScale {
				t.Fatalf("trial %d: emptied histogram not reset to its initial scale", trial)
			}
			continue
		}
		// Compare bucket by bucket at the remainder's scale, against the brute-force reference.
		ref := newRef(av, acc.Scale())
		refPosOff, refPos := dense(ref.pos)
		refNegOff, refNeg := dense(ref.neg)
		if acc.Scale() != merged || !sameCounts(refPos, refPosOff, acc.appendPositiveCounts(nil), acc.positiveOffset()) ||
			!sameCounts(refNeg, refNegOff, acc.appendNegativeCounts(nil), acc.negativeOffset()) {
			t.Fatalf("trial %d: buckets after subtract differ from a's own at scale %d (the merge reached %d)", trial, acc.Scale(), merged)
		}
	}
}

// sameCounts compares two bucket runs, ignoring zero buckets at either end.
func sameCounts(a []uint64, ao int32, b []uint64, bo int32) bool {
	m := map[int64]uint64{}
	for i, c := range a {
		if c != 0 {
			m[int64(ao)+int64(i)] += c
		}
	}
	for i, c := range b {
		if c != 0 {
			m[int64(bo)+int64(i)] -= c
		}
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

func TestSubtractRefusesWhatIsNotThereAndChangesNothing(t *testing.T) {
	h, o := New(DefaultScale, DefaultMaxBuckets), New(DefaultScale, DefaultMaxBuckets)
	for _, v := range []float64{1, 2, 3, -4} {
		h.Insert(v)
	}
	for _, v := range []float64{1, 2, 2, -4} { // one 2 too many
		o.Insert(v)
	}
	before := h.clone()
	if h.Subtract(o) {
		t.Fatal("subtracted a value h does not hold")
	}
	if !h.equal(before) {
		t.Fatal("a refused Subtract changed h")
	}
	// Values of o where h's counters are zero, a whole word of them: h holds buckets 0 and 20, o
	// buckets 2 and 9, which fall in one word (words are read from o's first counter) whose counters
	// in h are all zero.
	h, o = New(DefaultScale, DefaultMaxBuckets), New(DefaultScale, DefaultMaxBuckets)
	for _, idx := range []int{0, 0, 0, 0, 0, 20, 20, 20, 20, 20} {
		h.Insert(math.Exp2((float64(idx) + 0.5) / 64))
	}
	o.Insert(math.Exp2(2.5 / 64))
	o.Insert(math.Exp2(9.5 / 64))
	before = h.clone()
	if h.Subtract(o) {
		t.Fatal("subtracted values from buckets that h has empty")
	}
	if !h.equal(before) {
		t.Fatal("a refused Subtract changed h")
	}
	coarse := New(DefaultScale-1, DefaultMaxBuckets)
	coarse.Insert(1)
	if h.Subtract(coarse) {
		t.Fatal("subtracted a coarser histogram")
	}
}

func TestSubtractAllocatesNothing(t *testing.T) {
	h, o := New(DefaultScale, DefaultMaxBuckets), New(DefaultScale, DefaultMaxBuckets)
	for i := range 100 {
		o.Insert(float64(i + 1))
	}
	h.Merge(o)
	h.Merge(o)
	if n := testing.AllocsPerRun(100, func() {
		h.Subtract(o)
		h.Merge(o)
	}); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
