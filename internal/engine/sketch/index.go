package sketch

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"sync"
)

const (
	// minScale is the coarsest scale a Histogram can reach (base 2^1024),
	// the OpenTelemetry lower limit.
	minScale int32 = -10
	// maxScale is the finest scale accepted by New (base 2^(2^-20)), the
	// OpenTelemetry upper limit.
	maxScale int32 = 20

	// maxTableScale is the finest scale whose index is computed with an exact
	// precomputed boundary table; finer scales use math.Log.
	maxTableScale = 10

	signMask uint64 = 1 << 63
	expMask  uint64 = 0x7ff << 52
	mantMask uint64 = 1<<52 - 1
	expBias         = 1023
)

// indexTable maps the 52-bit mantissa of a float64 to the sub-octave bucket
// at one scale s in 1..maxTableScale. The octave [1,2) is cut into 2^(s+1)
// equal cells, each narrower than the narrowest bucket, so a cell holds at
// most one bucket boundary: the bucket is base + (mantissa > thr).
type indexTable struct {
	cells []tableCell
	scale uint // s
	shift uint // 51 - s: mantissa >> shift is the cell number
}

type tableCell struct {
	// thr is floor(2^52 * (2^(j/2^s) - 1)) for the one boundary j inside the
	// cell, or a sentinel above every mantissa when the cell has none.
	thr uint64
	// base is the number of boundaries j in 1..2^s-1 below the cell start.
	base int64
}

var (
	tableOnce [maxTableScale + 1]sync.Once
	tables    [maxTableScale + 1]*indexTable
)

// tableFor returns the (shared, lazily built) index table for scale s, or nil
// when s has no table (s <= 0 or s > maxTableScale).
func tableFor(s int32) *indexTable {
	if s < 1 || s > maxTableScale {
		return nil
	}
	tableOnce[s].Do(func() { tables[s] = buildTable(uint(s)) })
	return tables[s]
}

// boundaryMantissas returns B[j] = floor(2^52 * 2^(j/2^s)) - 2^52 for
// j in 1..2^s-1 (B[0] unused). The true boundaries 2^(j/2^s) are irrational,
// so a 52-bit mantissa m lies above boundary j exactly when m > B[j].
// They are computed with 256-bit arithmetic (2^(1/2^s) by s square roots,
// then repeated multiplication); the result is checked to be far from an
// integer so that the floor is certainly right.
func boundaryMantissas(s uint) []uint64 {
	const prec = 256
	n := 1 << s
	r := new(big.Float).SetPrec(prec).SetInt64(2)
	for i := uint(0); i < s; i++ {
		r.Sqrt(r)
	}
	p := new(big.Float).SetPrec(prec).SetUint64(1 << 52)
	ip := new(big.Int)
	fi := new(big.Float).SetPrec(prec)
	frac := new(big.Float).SetPrec(prec)
	eps := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), -120)
	oneMinus := new(big.Float).SetPrec(prec).Sub(big.NewFloat(1), eps)
	out := make([]uint64, n)
	for j := 1; j < n; j++ {
		p.Mul(p, r)
		p.Int(ip) // truncation == floor for positive values
		fi.SetInt(ip)
		frac.Sub(p, fi)
		if frac.Cmp(eps) < 0 || frac.Cmp(oneMinus) > 0 {
			panic(fmt.Sprintf("sketch: boundary %d/%d too close to an integer", j, n))
		}
		out[j] = ip.Uint64() - 1<<52
	}
	return out
}

func buildTable(s uint) *indexTable {
	n := 1 << s
	b := boundaryMantissas(s)
	cells := 2 * n
	width := uint64(1) << (51 - s)
	t := &indexTable{cells: make([]tableCell, cells), scale: s, shift: 51 - s}
	j := 1 // next boundary not yet below the current cell start
	for c := 0; c < cells; c++ {
		start := uint64(c) * width
		for j < n && b[j] < start {
			j++
		}
		cell := tableCell{thr: 1 << 53, base: int64(j - 1)}
		if j < n && b[j] < start+width-1 {
			cell.thr = b[j]
			if j+1 < n && b[j+1] < start+width-1 {
				panic("sketch: two boundaries in one index cell")
			}
		}
		t.cells[c] = cell
	}
	return t
}

// normalize splits the absolute bits of a finite non-zero float64 into the
// unbiased binary exponent e and the 52-bit fraction m, with the value being
// (1 + m/2^52) * 2^e; subnormals are normalized.
func normalize(a uint64) (e int, m uint64) {
	be := int(a >> 52)
	m = a & mantMask
	if be == 0 {
		lz := bits.LeadingZeros64(m)
		m = (m << uint(lz-11)) & mantMask
		be = 12 - lz
	}
	return be - expBias, m
}

// at returns the bucket index, at the table's scale, of the normal value with unbiased exponent e
// and 52-bit mantissa m: the octave's first bucket plus the boundaries below m. Small enough to be
// inlined into the insert path.
func (t *indexTable) at(e int, m uint64) int {
	c := &t.cells[m>>t.shift]
	return e<<t.scale + int(c.base) + int((c.thr-m)>>63) - int((m-1)>>63)
}

// logIndex is the OpenTelemetry reference mapping for fine scales: exact at
// powers of two, math.Log elsewhere, kept inside the value's octave.
func logIndex(a uint64, e int, m uint64, scale int32) int {
	if m == 0 {
		return e<<uint(scale) - 1
	}
	f := math.Float64frombits(a)
	i := int(math.Floor(math.Log(f) * math.Ldexp(math.Log2E, int(scale))))
	lo := e << uint(scale)
	hi := lo + 1<<uint(scale) - 1
	return min(max(i, lo), hi)
}

// minIndex and maxIndex bound the index of any finite non-zero float64 at a
// scale (the buckets of the smallest subnormal and of MaxFloat64).
func minIndex(scale int32) int {
	if scale >= 0 {
		return -1074<<uint(scale) - 1
	}
	return -1075 >> uint(-scale)
}

func maxIndex(scale int32) int {
	if scale >= 0 {
		return 1024<<uint(scale) - 1
	}
	return 1023 >> uint(-scale)
}

// lowerBoundLog2 is log2 of bucket i's lower bound at a scale: i * 2^-scale.
func lowerBoundLog2(i int, scale int32) float64 {
	return math.Ldexp(float64(i), -int(scale))
}
