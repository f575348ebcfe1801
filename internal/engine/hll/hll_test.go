package hll

import (
	"math"
	"math/bits"
	"slices"
	"testing"
)

// splitmix returns the i-th hash of a seeded sequence (SplitMix64): well mixed, as the caller's
// hashes are.
func splitmix(seed, i uint64) uint64 {
	z := seed*0x9e3779b97f4a7c15 + (i+1)*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func TestExactUpToExactMax(t *testing.T) {
	var s Sketch
	for n := 1; n <= ExactMax; n++ {
		s.Insert(splitmix(1, uint64(n)))
		s.Insert(splitmix(1, uint64(n))) // twice: counted once
		if got := s.Estimate(); got != float64(n) {
			t.Fatalf("after %d distinct hashes: %v", n, got)
		}
	}
	if s.dense {
		t.Fatalf("dense at %d hashes", ExactMax)
	}
	s.Insert(splitmix(1, ExactMax+1))
	if !s.dense {
		t.Fatalf("still exact past %d", ExactMax)
	}
	if got := s.Estimate(); math.Abs(got-(ExactMax+1)) > 1 {
		t.Fatalf("65 hashes estimated as %v", got)
	}
}

// TestRegistersMatchModel checks the packed registers against plain bytes kept by hand: register
// h>>50, rank the leading zeros of the 50 bits behind it plus one (51 for none).
func TestRegistersMatchModel(t *testing.T) {
	var s Sketch
	model := make([]uint8, m)
	hashes := []uint64{0, 1, 1 << 50, 1<<50 - 1, math.MaxUint64, 0x0003_0000_0000_0000}
	for i := range uint64(200000) {
		hashes = append(hashes, splitmix(7, i))
	}
	for _, h := range hashes {
		s.Insert(h)
		r := uint8(51)
		if w := h & (1<<50 - 1); w != 0 {
			r = uint8(bits.LeadingZeros64(w) - 14 + 1)
		}
		model[h>>50] = max(model[h>>50], r)
	}
	for i := range uint(m) {
		if s.reg(i) != model[i] {
			t.Fatalf("register %d: %d, want %d", i, s.reg(i), model[i])
		}
	}
}

// TestAccuracy measures the relative error over seeds at 10^4, 10^5 and 10^6 distinct values: at
// most 1% at the median and 3% at the 99th percentile (the contract's bounds).
func TestAccuracy(t *testing.T) {
	seeds := 400
	for _, n := range []int{1e4, 1e5, 1e6} {
		errs := make([]float64, seeds)
		var s Sketch
		for seed := range seeds {
			s.Reset()
			for i := range n {
				s.Insert(splitmix(uint64(seed)+1000, uint64(i)))
			}
			errs[seed] = math.Abs(s.Estimate()-float64(n)) / float64(n)
		}
		slices.Sort(errs)
		med, p99 := errs[seeds/2], errs[seeds*99/100]
		t.Logf("n=%d over %d seeds: median %.3f%%, p99 %.3f%%, max %.3f%%", n, seeds, 100*med, 100*p99, 100*errs[seeds-1])
		if med > 0.01 || p99 > 0.03 {
			t.Errorf("n=%d: median %.4f, p99 %.4f: want at most 0.01 and 0.03", n, med, p99)
		}
	}
}

func TestMergeIsUnion(t *testing.T) {
	for _, sizes := range [][2]int{{10, 20}, {40, 40}, {10, 5000}, {5000, 10}, {30000, 30000}} {
		var a, b, both Sketch
		// a holds [0, n0), b holds [n0/2, n0/2+n1): they overlap.
		for i := range sizes[0] {
			a.Insert(splitmix(3, uint64(i)))
			both.Insert(splitmix(3, uint64(i)))
		}
		for i := sizes[0] / 2; i < sizes[0]/2+sizes[1]; i++ {
			b.Insert(splitmix(3, uint64(i)))
			both.Insert(splitmix(3, uint64(i)))
		}
		a.Merge(&b)
		want := float64(max(sizes[0], sizes[0]/2+sizes[1]))
		if got := a.Estimate(); got != both.Estimate() || (want <= ExactMax && got != want) || math.Abs(got-want)/want > 0.03 {
			t.Errorf("sizes %v: merged %v, inserted together %v, distinct %v", sizes, got, both.Estimate(), want)
		}
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, ExactMax, ExactMax + 1, 100000} {
		var s, back Sketch
		for i := range n {
			s.Insert(splitmix(5, uint64(i)))
		}
		b := append(s.AppendBinary(nil), 9)
		rest, err := back.Decode(b)
		if err != nil || len(rest) != 1 || rest[0] != 9 {
			t.Fatalf("n=%d: rest %v, err %v", n, rest, err)
		}
		if back.Estimate() != s.Estimate() {
			t.Fatalf("n=%d: %v after a round trip, %v before", n, back.Estimate(), s.Estimate())
		}
		for cut := 0; cut < len(b)-1; cut += 1 + len(b)/50 {
			var x Sketch
			if _, err := x.Decode(b[:cut]); err == nil {
				t.Fatalf("n=%d: cut at %d decoded", n, cut)
			}
		}
	}
	var x Sketch
	bad := append([]byte{1}, make([]byte, regBytes)...)
	bad[1] = 63 // register 0 at rank 63 > 51
	if _, err := x.Decode(bad); err == nil {
		t.Fatal("a rank past 51 decoded")
	}
}

func TestSizeBound(t *testing.T) {
	var s Sketch
	for i := range 100000 {
		s.Insert(splitmix(9, uint64(i)))
	}
	if s.Bytes() > MaxBytes || regBytes != 12*1024 {
		t.Fatalf("%d bytes, registers %d", s.Bytes(), regBytes)
	}
}
