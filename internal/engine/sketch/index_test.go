package sketch

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refIndex computes the OpenTelemetry bucket index of |v| at scale s with
// exact integer arithmetic, independently of the package code.
//
// Write |v| = m * 2^e with m odd. For s >= 0 and N = 2^s the index is the
// largest i with 2^(i/N) < |v|, i.e. 2^(i-eN) < m^N. For an odd M = m^N that
// is bitlen(M)-1, except M = 1 where it is -1. For s < 0 the index is the
// scale-0 index shifted right by -s (bucket (2^(i*2^-s), 2^((i+1)*2^-s)]).
func refIndex(v float64, s int32) int {
	v = math.Abs(v)
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		panic("refIndex: need finite non-zero")
	}
	fr, exp := math.Frexp(v) // v = fr * 2^exp, fr in [0.5, 1)
	m := uint64(math.Ldexp(fr, 53))
	e := exp - 53
	for m&1 == 0 {
		m >>= 1
		e++
	}
	if s < 0 {
		return refIndex(v, 0) >> uint(-s)
	}
	n := int64(1) << uint(s)
	M := new(big.Int).Exp(new(big.Int).SetUint64(m), big.NewInt(n), nil)
	t := M.BitLen() - 1
	if m == 1 {
		t = -1
	}
	return e*int(n) + t
}

func TestRefIndexSanity(t *testing.T) {
	// Hand-checked values of the definition.
	cases := []struct {
		v     float64
		s     int32
		index int
	}{
		{1, 0, -1}, {2, 0, 0}, {3, 0, 1}, {4, 0, 1}, {4.5, 0, 2},
		{1, 3, -1}, {2, 3, 7}, {0.5, 3, -9},
		// float64 Sqrt2 squares to 2+4.4e-16, so it lies just above the true
		// boundary sqrt(2) between buckets 0 and 1; its predecessor is below.
		{math.Sqrt2, 1, 1},
		{1.4142135623730949, 1, 0},
		{1.5, 1, 1}, // (sqrt2, 2]
		{16, -1, 1}, {17, -1, 2}, {4, -1, 0}, {5, -1, 1}, {1, -2, -1}, {16, -2, 0}, {17, -2, 1},
	}
	for _, c := range cases {
		if got := refIndex(c.v, c.s); got != c.index {
			t.Errorf("refIndex(%v, %d) = %d, want %d", c.v, c.s, got, c.index)
		}
	}
}

// indexTestValues returns values that stress the index function at scale s.
func indexTestValues(s int32, rng *rand.Rand) []float64 {
	var vals []float64
	add := func(v float64) {
		if v > 0 && !math.IsInf(v, 0) {
			vals = append(vals, v)
		}
	}
	for k := -1074; k <= 1023; k++ {
		p := math.Ldexp(1, k)
		add(p)
		add(math.Nextafter(p, 0))
		add(math.Nextafter(p, math.Inf(1)))
		if k%17 == 0 {
			add(p * 1.5)
			add(p * 1.9999999999999998)
		}
	}
	add(math.MaxFloat64)
	add(math.SmallestNonzeroFloat64)
	add(2 * math.SmallestNonzeroFloat64)
	add(3 * math.SmallestNonzeroFloat64)
	add(0x1p-1022)                    // smallest normal
	add(math.Nextafter(0x1p-1022, 0)) // largest subnormal
	add(0x1.23456789abcdep-1040)      // a subnormal with many bits
	add(0x1.fffffffffffffp-1030)      // subnormal just below a power of two
	add(0x1.0000000000001p-1060)      // subnormal just above a power of two
	for i := 0; i < 2000; i++ {
		// Random bits: all exponents and mantissas, subnormals included.
		add(math.Float64frombits(rng.Uint64() &^ signMask))
	}
	for i := 0; i < 2000; i++ {
		// Latency-like range.
		add(math.Exp(rng.Float64()*40 - 20))
	}
	if s > 0 {
		// Near the irrational bucket boundaries 2^(j/2^s) within several
		// octaves: the float nearest the boundary and its neighbours.
		n := 1 << uint(s)
		step := max(1, n/64)
		for _, oct := range []int{-1060, -30, -1, 0, 1, 12, 1000} {
			for j := 1; j < n; j += step {
				b := math.Ldexp(math.Exp2(float64(j)/float64(n)), oct)
				x := b
				for d := 0; d < 3; d++ {
					x = math.Nextafter(x, 0)
				}
				for d := 0; d < 7; d++ {
					add(x)
					x = math.Nextafter(x, math.Inf(1))
				}
			}
		}
	}
	return vals
}

func TestIndexExact(t *testing.T) {
	scales := []int32{-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	if !testing.Short() {
		scales = append(scales, 9, 10)
	}
	for _, s := range scales {
		rng := rand.New(rand.NewPCG(uint64(s+100), 7))
		vals := indexTestValues(s, rng)
		if s >= 9 {
			vals = vals[len(vals)-3000:] // big.Int powers get expensive
		}
		for _, v := range vals {
			want := refIndex(v, s)
			if got := indexAt(v, s); got != want {
				t.Fatalf("scale %d: index(%v = %x) = %d, want %d", s, v, math.Float64bits(v), got, want)
			}
			if got := indexAt(-v, s); got != want {
				t.Fatalf("scale %d: index(%v) = %d, want %d", s, -v, got, want)
			}
		}
	}
}

// TestIndexViaHistogram checks the index through the public API, including
// histograms whose scale was reached by downscaling from a finer one.
func TestIndexViaHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []int32{-2, 0, 3, 6, 8, 12} {
		for i := 0; i < 300; i++ {
			v := math.Float64frombits(rng.Uint64() &^ signMask)
			if math.IsInf(v, 0) || math.IsNaN(v) || v == 0 {
				continue
			}
			want := refIndex(v, s)
			h := New(s, DefaultMaxBuckets)
			h.Insert(v)
			h.Insert(-v)
			if h.positiveOffset() != int32(want) || h.negativeOffset() != int32(want) {
				t.Fatalf("scale %d, v=%v: offsets %d/%d, want %d", s, v, h.positiveOffset(), h.negativeOffset(), want)
			}
			if c := h.appendPositiveCounts(nil); len(c) != 1 || c[0] != 1 {
				t.Fatalf("counts %v", c)
			}
		}
	}
}

// TestIndexFineScales covers the math.Log path (scales above the table):
// exact at powers of two and, for generic values, against the exact
// reference at scale 11 and 12.
func TestIndexFineScales(t *testing.T) {
	for _, s := range []int32{11, 12, 16, 20} {
		for k := -1074; k <= 1023; k++ {
			p := math.Ldexp(1, k)
			want := k<<uint(s) - 1
			if got := indexAt(p, s); got != want {
				t.Fatalf("scale %d: index(2^%d) = %d, want %d", s, k, got, want)
			}
		}
		if got, want := indexAt(math.MaxFloat64, s), maxIndex(s); got != want {
			t.Fatalf("scale %d: index(MaxFloat64) = %d, want %d", s, got, want)
		}
	}
	if testing.Short() {
		return
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range []int32{11, 12} {
		for i := 0; i < 40; i++ {
			v := math.Exp(rng.Float64()*40 - 20)
			if got, want := indexAt(v, s), refIndex(v, s); got != want {
				t.Fatalf("scale %d: index(%v) = %d, want %d", s, v, got, want)
			}
		}
	}
}

func TestIndexBounds(t *testing.T) {
	for s := minScale; s <= 8; s++ {
		if got, want := minIndex(s), refIndex(math.SmallestNonzeroFloat64, s); got != want {
			t.Errorf("minIndex(%d) = %d, want %d", s, got, want)
		}
		if got, want := maxIndex(s), refIndex(math.MaxFloat64, s); got != want {
			t.Errorf("maxIndex(%d) = %d, want %d", s, got, want)
		}
	}
}

// TestTableBoundaries checks the table thresholds against exact integer
// roots: B = floor(2^(52 + j/N)) satisfies B^N <= 2^(52N+j) < (B+1)^N.
func TestTableBoundaries(t *testing.T) {
	for s := uint(1); s <= 7; s++ {
		n := 1 << s
		b := boundaryMantissas(s)
		for j := 1; j < n; j++ {
			lim := new(big.Int).Lsh(big.NewInt(1), uint(52*n+j))
			x := new(big.Int).SetUint64(b[j] + 1<<52)
			lo := new(big.Int).Exp(x, big.NewInt(int64(n)), nil)
			hi := new(big.Int).Exp(x.Add(x, big.NewInt(1)), big.NewInt(int64(n)), nil)
			if lo.Cmp(lim) > 0 || hi.Cmp(lim) <= 0 {
				t.Fatalf("scale %d boundary %d: wrong floor %d", s, j, b[j])
			}
		}
	}
}

// indexAt is the production index (Histogram.index, which Insert uses) of |v| for a histogram created
// at the given scale.
func indexAt(v float64, scale int32) int {
	return New(scale, maxMaxBuckets).index(math.Float64bits(v) &^ signMask)
}
