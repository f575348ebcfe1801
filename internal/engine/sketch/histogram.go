package sketch

import (
	"encoding/binary"
	"math"
)

const (
	// DefaultScale gives base 2^(1/64): the relative error of a quantile
	// estimate is at most (base-1)/(base+1) ≈ 0.54% while no downscaling
	// happened.
	DefaultScale = 6
	// DefaultMaxBuckets is the default limit on the span of occupied bucket
	// indices per sign; beyond it the histogram downscales.
	DefaultMaxBuckets = 4096

	// minMaxBuckets and maxMaxBuckets bound the maxBuckets argument of New.
	// With at least 4 buckets every pair of finite values fits at minScale.
	minMaxBuckets = 4
	maxMaxBuckets = 1 << 20
)

// Histogram is a base-2 exponential histogram (OpenTelemetry data model)
// usable as a mergeable quantile sketch. Create it with New; the zero value
// is not ready for Insert/Merge (UnmarshalBinary and CopyFrom do work on it).
// A Histogram is not safe for concurrent use.
type Histogram struct {
	pos, neg buckets

	// tbl is the exact index table for initScale, nil when initScale <= 0 or
	// initScale > maxTableScale.
	tbl *indexTable

	count, zeroCount uint64
	sum, min, max    float64 // min=+Inf, max=-Inf while empty

	scale      int32
	initScale  int32
	maxBuckets int32
	// shift turns an index at initScale into one at scale (initScale-scale);
	// for initScale <= 0 it is -scale, applied to the scale-0 index.
	shift uint8
}

// New returns an empty histogram at the given scale (clamped to
// [minScale, maxScale]) whose occupied index span per sign never exceeds
// maxBuckets (clamped to [minMaxBuckets, maxMaxBuckets]).
func New(scale int32, maxBuckets int) *Histogram {
	h := &Histogram{}
	h.configure(scale, maxBuckets)
	h.Reset()
	return h
}

func (h *Histogram) configure(scale int32, maxBuckets int) {
	scale = min(max(scale, minScale), maxScale)
	maxBuckets = min(max(maxBuckets, minMaxBuckets), maxMaxBuckets)
	h.initScale = scale
	h.maxBuckets = int32(maxBuckets)
	h.tbl = tableFor(scale)
}

func (h *Histogram) setScale(s int32) {
	h.scale = s
	if h.initScale <= 0 {
		h.shift = uint8(-s)
	} else {
		h.shift = uint8(h.initScale - s)
	}
}

// Reset empties the histogram and returns it to its initial scale, keeping
// the allocated bucket capacity so that refilling it does not allocate.
func (h *Histogram) Reset() {
	h.count, h.zeroCount = 0, 0
	h.sum, h.min, h.max = 0, math.Inf(1), math.Inf(-1)
	h.setScale(h.initScale)
	mb := int(h.maxBuckets)
	h.pos.reinit(0, 0, 0, mb)
	h.neg.reinit(0, 0, 0, mb)
}

// index returns the bucket index, at the current scale, of a finite
// non-zero absolute value given by its bits.
func (h *Histogram) index(a uint64) int {
	if t := h.tbl; t != nil {
		e := int(a>>52) - expBias
		m := a & mantMask
		if a < 1<<52 {
			e, m = normalize(a)
		}
		return t.at(e, m) >> h.shift
	}
	return h.indexSlow(a)
}

func (h *Histogram) indexSlow(a uint64) int {
	e, m := normalize(a)
	if h.initScale <= 0 {
		return (e - int((m-1)>>63)) >> h.shift
	}
	return logIndex(a, e, m, h.initScale) >> h.shift
}

// Insert records v. It returns false, leaving h unchanged, for NaN and ±Inf.
// Zeros (either sign) go to the zero count; negative values to the negative
// buckets by absolute value.
func (h *Histogram) Insert(v float64) bool {
	bits := math.Float64bits(v)
	if bits&expMask == expMask {
		return false
	}
	h.addSummary(v, 1)
	a := bits &^ signMask
	if a == 0 {
		h.zeroCount = AddCounts(h.zeroCount, 1)
		return true
	}
	var idx int
	if t := h.tbl; t != nil && a >= 1<<52 { // the common case, with the table lookup inlined
		idx = t.at(int(a>>52)-expBias, a&mantMask) >> h.shift
	} else {
		idx = h.index(a)
	}
	b := &h.pos
	if a != bits {
		b = &h.neg
	}
	s := uint(idx - int(b.lo))
	if s < uint(b.n) {
		if int32(idx) < b.hlo || int32(idx) > b.hhi {
			b.note(idx)
		}
		d := b.data
		switch b.wlog {
		case 0:
			if s < uint(len(d)) && d[s] != 0xff {
				d[s]++
				return true
			}
		case 1:
			if c := binary.LittleEndian.Uint16(d[s*2:]); c != 0xffff {
				binary.LittleEndian.PutUint16(d[s*2:], c+1)
				return true
			}
		case 2:
			if c := binary.LittleEndian.Uint32(d[s*4:]); c != 0xffffffff {
				binary.LittleEndian.PutUint32(d[s*4:], c+1)
				return true
			}
		default:
			p := d[s*8:]
			binary.LittleEndian.PutUint64(p, AddCounts(binary.LittleEndian.Uint64(p), 1))
			return true
		}
	}
	h.insertSlow(b, idx, 1)
	return true
}

// InsertN records v n times, as n calls of Insert(v) would (but for the rounding of the sum, which
// adds v×n once): one count of n in v's bucket, not n inserts. It returns false, leaving h unchanged,
// for NaN and ±Inf; n = 0 records nothing.
func (h *Histogram) InsertN(v float64, n uint64) bool {
	bits := math.Float64bits(v)
	if bits&expMask == expMask {
		return false
	}
	if n == 0 {
		return true
	}
	h.addSummary(v, n)
	a := bits &^ signMask
	if a == 0 {
		h.zeroCount = AddCounts(h.zeroCount, n)
		return true
	}
	b := &h.pos
	if a != bits {
		b = &h.neg
	}
	h.insertSlow(b, h.index(a), n)
	return true
}

// addSummary counts n values v (finite) in the count, sum, min and max; a count that does not fit
// saturates (AddCounts). v×1 is exactly v: an insert's sum is what adding v makes.
func (h *Histogram) addSummary(v float64, n uint64) {
	h.count = AddCounts(h.count, n)
	h.sum += v * float64(n)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// insertSlow adds n to bucket idx of b: for Insert, when the fast path could
// not (the index is outside the window, to grow, move or downscale, or the
// counter is full, to widen); for InsertN, always.
func (h *Histogram) insertSlow(b *buckets, idx int, n uint64) {
	h.mustBeConfigured()
	for {
		s := idx - int(b.lo)
		if s >= 0 && s < int(b.n) {
			b.note(idx)
			b.add(s, n)
			return
		}
		ulo, uhi, used := b.indexRange()
		nlo, nhi := idx, idx
		if used {
			nlo, nhi = min(ulo, idx), max(uhi, idx)
		}
		mb := int(h.maxBuckets)
		if nhi-nlo+1 > mb {
			k := uint(1)
			for spanAt(nlo, nhi, k) > mb {
				k++
			}
			h.downscale(k)
			idx >>= k
			continue
		}
		b.ensure(nlo, nhi, ulo, uhi, used, mb)
	}
}

// mustBeConfigured panics (instead of looping forever on a zero bucket
// limit) when h is an unconfigured zero value.
func (h *Histogram) mustBeConfigured() {
	if h.maxBuckets == 0 {
		panic("sketch: Histogram zero value used; create it with New")
	}
}

// downscale lowers the scale by k for both signs (the other sign's span only
// shrinks, so it keeps fitting).
func (h *Histogram) downscale(k uint) {
	if k == 0 {
		return
	}
	h.pos.downscale(k)
	h.neg.downscale(k)
	h.setScale(h.scale - int32(k))
}

// Merge adds o's contents to h exactly: counts, zero count, sum, min, max.
// If the scales differ, h's finer buckets are downscaled to o's scale (or
// o's buckets are mapped to h's coarser scale; o itself is not modified), and
// h downscales further if the merged span would exceed h's maxBuckets.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.count == 0 {
		return
	}
	h.mustBeConfigured()
	if o == h {
		o = h.clone() // the only allocating case
	}
	mb := int(h.maxBuckets)
	target := min(h.scale, o.scale)
	var k uint
	{
		hd := uint(h.scale - target)
		od := uint(o.scale - target)
		hpl, hph, hp := h.pos.indexRange()
		hnl, hnh, hn := h.neg.indexRange()
		opl, oph, op := o.pos.indexRange()
		onl, onh, on := o.neg.indexRange()
		for target-int32(k) > minScale {
			if unionSpan(hpl, hph, hp, hd+k, opl, oph, op, od+k) <= mb &&
				unionSpan(hnl, hnh, hn, hd+k, onl, onh, on, od+k) <= mb {
				break
			}
			k++
		}
	}
	target -= int32(k)
	h.downscale(uint(h.scale - target))
	d := uint(o.scale - target)
	mergeSide(&h.pos, &o.pos, d, mb)
	mergeSide(&h.neg, &o.neg, d, mb)
	h.count = AddCounts(h.count, o.count)
	h.zeroCount = AddCounts(h.zeroCount, o.zeroCount)
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// unionSpan is the span of the union of two index ranges after shifting them
// right by ka and kb (0 when both are empty).
func unionSpan(al, ah int, aok bool, ka uint, bl, bh int, bok bool, kb uint) int {
	switch {
	case aok && bok:
		return max(ah>>ka, bh>>kb) - min(al>>ka, bl>>kb) + 1
	case aok:
		return spanAt(al, ah, ka)
	case bok:
		return spanAt(bl, bh, kb)
	}
	return 0
}

// mergeSide adds the counts of o into h, mapping o's index i to i>>d. The
// union must fit within maxSlots.
func mergeSide(h, o *buckets, d uint, maxSlots int) {
	of, ol, ok := o.usedRange()
	if !ok {
		return
	}
	olo := int(o.lo)
	lo, hi := (of+olo)>>d, (ol+olo)>>d
	ulo, uhi, used := h.indexRange()
	nlo, nhi := lo, hi
	if used {
		nlo, nhi = min(ulo, lo), max(uhi, hi)
	}
	h.ensure(nlo, nhi, ulo, uhi, used, maxSlots)
	h.note(lo)
	h.note(hi)
	hlo := int(h.lo)
	if d == 0 && h.wlog == 0 && o.wlog == 0 {
		// Common case: byte counters at the same scale.
		src := o.data[of : ol+1]
		base := of + olo - hlo
		dst := h.data[base:]
		dst = dst[:len(src)]
		if i := addBytes(dst, src); i < len(src) {
			// A counter from i would overflow: h.add widens the counters (which may move h.data); the
			// rest go through it.
			for ; i < len(src); i++ {
				if src[i] != 0 {
					h.add(base+i, uint64(src[i]))
				}
			}
		}
		return
	}
	if d == 0 {
		var buf [runChunk]uint64
		for s := of; s <= ol; s += runChunk {
			run := buf[:min(runChunk, ol+1-s)]
			o.readRun(s, run)
			h.addRun(s+olo-hlo, run)
		}
		return
	}
	for s := of; s <= ol; s++ {
		c := o.get(s)
		if c == 0 {
			continue
		}
		h.add((s+olo)>>d-hlo, c)
	}
}

// addBytes adds byte counters src to dst, eight at a time, and stops where one would overflow. It
// returns where it stopped: the first of the eight counters read as one word that holds it, or that
// counter itself in the last, partial word; len(src) when none would overflow. Counters from there on
// are left as they were.
func addBytes(dst, src []byte) int {
	dst = dst[:len(src)]
	n := len(src) &^ 7
	for i := 0; i < n; i += 8 {
		o := binary.LittleEndian.Uint64(src[i:])
		if o == 0 {
			continue
		}
		s, ok := addLanes(binary.LittleEndian.Uint64(dst[i:]), o)
		if !ok {
			return i
		}
		binary.LittleEndian.PutUint64(dst[i:], s)
	}
	for i := n; i < len(src); i++ {
		s := uint(dst[i]) + uint(src[i])
		if s > 0xff {
			return i
		}
		dst[i] = byte(s)
	}
	return len(src)
}

// clone returns a deep copy of h.
func (h *Histogram) clone() *Histogram {
	c := &Histogram{}
	c.CopyFrom(h)
	return c
}

// CopyFrom makes h equal to o (contents, scale, initial scale and
// maxBuckets), reusing h's bucket capacity.
func (h *Histogram) CopyFrom(o *Histogram) {
	if h == o {
		return
	}
	pos, neg := h.pos, h.neg
	*h = *o
	h.pos, h.neg = pos, neg
	copyBuckets(&h.pos, &o.pos, int(o.maxBuckets))
	copyBuckets(&h.neg, &o.neg, int(o.maxBuckets))
}

func copyBuckets(h, o *buckets, maxSlots int) {
	f, l, ok := o.usedRange()
	if !ok {
		h.reinit(0, 0, 0, maxSlots)
		return
	}
	span := l - f + 1
	h.reinit(o.wlog, f+int(o.lo), span, maxSlots)
	w := o.wlog
	copy(h.data[(f+int(o.lo)-int(h.lo))<<w:], o.data[f<<w:(l+1)<<w])
	h.note(f + int(o.lo))
	h.note(l + int(o.lo))
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.count }

// Sum returns the sum of the recorded values.
func (h *Histogram) Sum() float64 { return h.sum }

// Min returns the smallest recorded value, or NaN when empty.
func (h *Histogram) Min() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.min
}

// Max returns the largest recorded value, or NaN when empty.
func (h *Histogram) Max() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.max
}

// Scale returns the current scale.
func (h *Histogram) Scale() int32 { return h.scale }

// ZeroCount returns the number of recorded zeros.
func (h *Histogram) ZeroCount() uint64 { return h.zeroCount }

// Quantile estimates the nearest-rank quantile x_k, k = nearestRank(q, n), of
// the n recorded values x_0..x_{n-1} sorted ascending: the least value with at
// least a share q of the values at or below it; q is clamped to [0, 1] (NaN counts as 0).
// It walks the negative buckets (most negative first), the zero count, then
// the positive buckets to the bucket holding rank k and returns the value with
// equal relative error to both bounds of that bucket (L,U], 2LU/(L+U)
// (negated on the negative side; 0 for the zero bucket), clamped to
// [Min, Max]. It returns NaN when h is empty.
func (h *Histogram) Quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	if !(q > 0) {
		q = 0
	} else if q > 1 {
		q = 1
	}
	rank := nearestRank(q, h.count)
	// Walk from whichever end is nearer: rank r from the bottom is rank
	// count-1-r from the top.
	if rank >= h.count/2 {
		r := h.count - 1 - rank
		if i, ok := walk(&h.pos, &r, true); ok {
			return h.clamp(h.bucketMid(i))
		}
		if r < h.zeroCount {
			return h.clamp(0)
		}
		r -= h.zeroCount
		if i, ok := walk(&h.neg, &r, false); ok {
			return h.clamp(-h.bucketMid(i))
		}
		return h.min // only with inconsistent counts (uint64 wrap)
	}
	if i, ok := walk(&h.neg, &rank, true); ok {
		return h.clamp(-h.bucketMid(i))
	}
	if rank < h.zeroCount {
		return h.clamp(0)
	}
	rank -= h.zeroCount
	if i, ok := walk(&h.pos, &rank, false); ok {
		return h.clamp(h.bucketMid(i))
	}
	return h.max // only with inconsistent counts (uint64 wrap)
}

// walk visits the buckets of b in index order (descending if down) and
// returns the index of the bucket holding the 0-based rank *r, or subtracts
// b's total from *r and returns false.
func walk(b *buckets, r *uint64, down bool) (int, bool) {
	f, l, ok := b.usedRange()
	if !ok {
		return 0, false
	}
	rank := *r
	if b.wlog == 0 {
		// Byte counters (until a counter first passes 255): slot s is data[s], so scan them in
		// place rather than copying them out 64 at a time.
		d := b.data[f : l+1]
		if down {
			for j := len(d) - 1; j >= 0; j-- {
				c := uint64(d[j])
				if rank < c {
					return f + j + int(b.lo), true
				}
				rank -= c
			}
		} else {
			for j, c := range d {
				if rank < uint64(c) {
					return f + j + int(b.lo), true
				}
				rank -= uint64(c)
			}
		}
		*r = rank
		return 0, false
	}
	var buf [runChunk]uint64
	if down {
		for end := l + 1; end > f; end -= runChunk {
			start := max(f, end-runChunk)
			run := buf[:end-start]
			b.readRun(start, run)
			for j := len(run) - 1; j >= 0; j-- {
				if rank < run[j] {
					return start + j + int(b.lo), true
				}
				rank -= run[j]
			}
		}
	} else {
		for start := f; start <= l; start += runChunk {
			run := buf[:min(runChunk, l+1-start)]
			b.readRun(start, run)
			for j, c := range run {
				if rank < c {
					return start + j + int(b.lo), true
				}
				rank -= c
			}
		}
	}
	*r = rank
	return 0, false
}

func (h *Histogram) clamp(v float64) float64 {
	return min(max(v, h.min), h.max)
}

// bucketMid returns 2LU/(L+U) for bucket i, (L,U] = (base^i, base^(i+1)],
// computed as 2^(i*2^-scale) * 2base/(1+base) in log space to stay finite
// for all in-range buckets at all scales.
func (h *Histogram) bucketMid(i int) float64 {
	return math.Exp2(lowerBoundLog2(i, h.scale) + midLog2[h.scale-minScale])
}

// midLog2 holds, for each scale s at index s-minScale, log2(2*base/(1+base)) = 1 - log2(1 + 1/base),
// the distance in log space from a bucket's lower bound to its 2LU/(L+U): a constant of the scale.
var midLog2 = func() (t [maxScale - minScale + 1]float64) {
	for s := minScale; s <= maxScale; s++ {
		lb := math.Ldexp(1, -int(s)) // log2(base)
		t[s-minScale] = 1 - math.Log1p(math.Exp2(-lb))/math.Ln2
	}
	return t
}()

// nearestRank returns the 0-based rank k = ceil(q*n) - 1 of the nearest-rank
// quantile q among n sorted values, clamped to [0, n-1]. A relative slack of
// 1e-9 keeps products such as 0.99*100, which float64 computes a hair above 99,
// on the intended rank.
func nearestRank(q float64, n uint64) uint64 {
	if n == 0 || !(q > 0) {
		return 0
	}
	x := q * float64(n)
	k := math.Ceil(x - 1e-9*x)
	if k < 1 {
		return 0
	}
	if k >= float64(n) {
		return n - 1
	}
	return uint64(k) - 1
}
