package sketch

import (
	"encoding/binary"
	"math/bits"
)

// minSlots is the size of the first bucket window allocated for a sign.
const minSlots = 16

// buckets is one sign's dense bucket array: slot s holds the count of bucket
// index lo+s, for s in [0, n). Counters are little-endian and 1<<wlog bytes
// wide; the whole array is widened (1 -> 2 -> 4 -> 8 bytes) when one counter
// would overflow.
//
// Invariants: len(data) == n<<wlog; n <= the histogram's maxBuckets (so any
// index that lands inside the window keeps the occupied span within the
// limit); every byte of data[:cap(data)] outside a non-zero counter is zero.
type buckets struct {
	data []byte
	lo   int32
	n    int32
	wlog uint8
	// [hlo, hhi] holds the index of every non-zero counter (none when hhi < hlo). It may be wider
	// than the counters in use: usedRange scans inward from it instead of from the window's ends,
	// which matters for a window much wider than its data (a running sliding-window sketch keeps
	// its width while panes are merged in and subtracted out).
	hlo, hhi int32
}

// note widens the bound to index i, before or after a counter there becomes non-zero.
func (b *buckets) note(i int) {
	switch {
	case b.hhi < b.hlo:
		b.hlo, b.hhi = int32(i), int32(i)
	case int32(i) < b.hlo:
		b.hlo = int32(i)
	case int32(i) > b.hhi:
		b.hhi = int32(i)
	}
}

// tighten shrinks the bound to the counters in use, after counters decreased.
func (b *buckets) tighten() {
	lo, hi, ok := b.indexRange()
	if !ok {
		b.hlo, b.hhi = 1, 0
		return
	}
	b.hlo, b.hhi = int32(lo), int32(hi)
}

// maxCount is the largest counter value for each width.
var maxCount = [4]uint64{0xff, 0xffff, 0xffffffff, 1<<64 - 1}

func (b *buckets) get(s int) uint64 {
	d := b.data
	switch b.wlog {
	case 0:
		return uint64(d[s])
	case 1:
		return uint64(binary.LittleEndian.Uint16(d[s<<1:]))
	case 2:
		return uint64(binary.LittleEndian.Uint32(d[s<<2:]))
	default:
		return binary.LittleEndian.Uint64(d[s<<3:])
	}
}

// set stores c, which must fit the current width.
func (b *buckets) set(s int, c uint64) {
	d := b.data
	switch b.wlog {
	case 0:
		d[s] = byte(c)
	case 1:
		binary.LittleEndian.PutUint16(d[s<<1:], uint16(c))
	case 2:
		binary.LittleEndian.PutUint32(d[s<<2:], uint32(c))
	default:
		binary.LittleEndian.PutUint64(d[s<<3:], c)
	}
}

// tryAdd adds c to slot s unless the sum would overflow the counter width.
// At width 8 it always succeeds, saturating at 2^64-1 (see AddCounts).
func (b *buckets) tryAdd(s int, c uint64) bool {
	old := b.get(s)
	if c > maxCount[b.wlog]-old {
		if b.wlog < 3 {
			return false
		}
		c = maxCount[3] - old
	}
	b.set(s, old+c)
	return true
}

// AddCounts returns a+b, or 2^64-1 where that would wrap: a count that does not fit stays at the
// greatest one instead of going back to a small number. Counts that reach it come only from inputs
// that say so (a histogram point's own counts), never from counting records one by one. Branchless:
// it sits on the paths that add up bucket counts.
func AddCounts(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	return s | -carry
}

// add adds c to slot s, widening the counters as needed.
func (b *buckets) add(s int, c uint64) {
	for !b.tryAdd(s, c) {
		b.widen()
	}
}

// widen doubles the counter width, in place when the capacity allows.
func (b *buckets) widen() {
	ow := b.wlog
	if ow >= 3 {
		return
	}
	n := int(b.n)
	need := n << (ow + 1)
	old := b.data
	var nd []byte
	if need <= cap(old) {
		nd = old[:need]
	} else {
		nd = make([]byte, need)
	}
	// Back to front: the new slot s overlaps only old slots >= s, which have
	// been read already.
	nb := buckets{data: nd, n: b.n, wlog: ow + 1}
	for s := n - 1; s >= 0; s-- {
		c := b.get(s)
		nb.set(s, c)
	}
	b.data = nd
	b.wlog = ow + 1
}

// usedRange returns the slots of the first and last non-zero counters. It scans inward from the
// bound [hlo, hhi], eight bytes at a time.
func (b *buckets) usedRange() (first, last int, ok bool) {
	if b.hhi < b.hlo {
		return 0, 0, false
	}
	w := b.wlog
	fs, ls := max(int(b.hlo)-int(b.lo), 0), min(int(b.hhi)-int(b.lo), int(b.n)-1)
	if fs > ls {
		return 0, 0, false
	}
	d := b.data[fs<<w : (ls+1)<<w]
	n := len(d)
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(d[i:]) == 0 {
		i += 8
	}
	for i < n && d[i] == 0 {
		i++
	}
	if i == n {
		return 0, 0, false
	}
	j := n // d[j:] is all zero; d[i] is not, so the scan stops above i
	for j-8 > i && binary.LittleEndian.Uint64(d[j-8:]) == 0 {
		j -= 8
	}
	j--
	for d[j] == 0 {
		j--
	}
	return fs + i>>w, fs + j>>w, true
}

// indexRange returns the first and last occupied bucket indices.
func (b *buckets) indexRange() (lo, hi int, ok bool) {
	f, l, ok := b.usedRange()
	if !ok {
		return 0, 0, false
	}
	return f + int(b.lo), l + int(b.lo), true
}

// ensure makes the window cover indices [nlo, nhi], keeping the occupied
// indices [ulo, uhi] (used reports whether there are any). The window grows
// by about 1.5x (reusing spare capacity) and never beyond maxSlots, which
// must be >= nhi-nlo+1.
func (b *buckets) ensure(nlo, nhi, ulo, uhi int, used bool, maxSlots int) {
	lo := int(b.lo)
	if nlo >= lo && nhi < lo+int(b.n) {
		return
	}
	span := nhi - nlo + 1
	newN := int(b.n)
	if span > newN {
		newN = min(max(span+span/2, newN+newN/2, minSlots), maxSlots)
	}
	newLo := nlo - (newN-span)/2
	w := b.wlog
	need := newN << w
	if need <= cap(b.data) {
		d := b.data[:need]
		if used {
			src := b.data[(ulo-lo)<<w : (uhi-lo+1)<<w]
			dst := (ulo - newLo) << w
			copy(d[dst:], src)
			clear(d[:dst])
			clear(d[dst+len(src):])
		}
		b.data = d
	} else {
		d := make([]byte, need)
		if used {
			copy(d[(ulo-newLo)<<w:], b.data[(ulo-lo)<<w:(uhi-lo+1)<<w])
		}
		b.data = d
	}
	b.lo = int32(newLo)
	b.n = int32(newN)
}

// downscale merges buckets so that index i becomes i>>k.
func (b *buckets) downscale(k uint) {
	if k == 0 {
		return
	}
	first, last, ok := b.usedRange()
	lo := int(b.lo)
	if b.hlo <= b.hhi {
		b.hlo, b.hhi = b.hlo>>k, b.hhi>>k // i becomes i>>k, in order
	}
	if !ok {
		b.lo = int32(lo >> k)
		return
	}
	ulo, uhi := first+lo, last+lo
	if b.wlog < 3 {
		// Widen first if a merged counter would overflow.
		var peak, acc uint64
		cur := ulo >> k
		for i := ulo; i <= uhi; i++ {
			if i>>k != cur {
				cur, acc = i>>k, 0
			}
			c := b.get(i - lo)
			if acc+c < acc {
				peak = 1<<64 - 1
				break
			}
			acc += c
			peak = max(peak, acc)
		}
		for b.wlog < 3 && peak > maxCount[b.wlog] {
			b.widen()
		}
	}
	// In place, front to back: the new slot (i>>k)-(ulo>>k) is never after
	// the old slot i-lo, so unread old slots are never overwritten.
	newLo := ulo >> k
	for i := ulo; i <= uhi; i++ {
		s := i - lo
		c := b.get(s)
		if c == 0 {
			continue
		}
		b.set(s, 0)
		ns := i>>k - newLo
		b.set(ns, AddCounts(b.get(ns), c))
	}
	b.lo = int32(newLo)
}

// reinit empties b for holding an occupied span of span slots starting at
// index ulo with counters 1<<wlog bytes wide, reusing capacity. A plain reset
// (span 0) keeps the window's place and width; otherwise the window is the span
// (or minSlots), centred on it, and inserts grow it within the capacity without
// allocating.
func (b *buckets) reinit(wlog uint8, ulo, span, maxSlots int) {
	// Every non-zero counter lies in the bound, and the bytes past len(b.data) are zero already
	// (invariant): clearing the bound clears everything, and keeps a reset cheap in a wide window.
	if b.hlo <= b.hhi {
		fs, ls := max(int(b.hlo)-int(b.lo), 0), min(int(b.hhi)-int(b.lo), int(b.n)-1)
		if fs <= ls {
			clear(b.data[fs<<b.wlog : (ls+1)<<b.wlog])
		}
	}
	full := b.data[:cap(b.data)]
	n := max(span, min(minSlots, maxSlots))
	if span == 0 {
		// A reset keeps the window where it was and as wide as it was (at the new width): the next
		// values most likely fall where the last ones did, and a wide window costs no scans (usedRange
		// starts from the bound).
		n = max(n, min(int(b.n), cap(full)>>wlog, maxSlots))
	}
	if n<<wlog > cap(full) {
		full = make([]byte, n<<wlog)
	}
	b.data = full[:n<<wlog]
	b.n = int32(n)
	b.wlog = wlog
	b.hlo, b.hhi = 1, 0 // empty
	if span > 0 {
		b.lo = int32(ulo - (n-span)/2)
	}
}

// spanAt is the number of buckets covering [lo, hi] after downscaling by k.
func spanAt(lo, hi int, k uint) int {
	return hi>>k - lo>>k + 1
}

// runChunk is the number of counters moved per readRun/addRun call by bulk
// operations (a stack buffer of this many uint64s).
const runChunk = 64

// readRun copies the counters of slots [s, s+len(dst)) into dst.
func (b *buckets) readRun(s int, dst []uint64) {
	d := b.data
	switch b.wlog {
	case 0:
		src := d[s : s+len(dst)]
		for i, c := range src {
			dst[i] = uint64(c)
		}
	case 1:
		src := d[s<<1 : (s+len(dst))<<1]
		for i := range dst {
			dst[i] = uint64(binary.LittleEndian.Uint16(src[i<<1:]))
		}
	case 2:
		src := d[s<<2 : (s+len(dst))<<2]
		for i := range dst {
			dst[i] = uint64(binary.LittleEndian.Uint32(src[i<<2:]))
		}
	default:
		src := d[s<<3 : (s+len(dst))<<3]
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(src[i<<3:])
		}
	}
}

// addRun adds src to the counters of slots [s, s+len(src)), widening as
// needed.
func (b *buckets) addRun(s int, src []uint64) {
	for i := 0; i < len(src); {
		i += b.addRunFast(s+i, src[i:])
		if i < len(src) {
			b.add(s+i, src[i]) // overflow: widen
			i++
		}
	}
}

// addRunFast adds src to slots from s at the current width and returns how
// many it added before the first counter that would overflow.
func (b *buckets) addRunFast(s int, src []uint64) int {
	d := b.data
	switch b.wlog {
	case 0:
		dst := d[s : s+len(src)]
		for i, c := range src {
			v := uint64(dst[i]) + c
			if c > 0xff || v > 0xff {
				return i
			}
			dst[i] = byte(v)
		}
	case 1:
		dst := d[s<<1 : (s+len(src))<<1]
		for i, c := range src {
			p := dst[i<<1:]
			v := uint64(binary.LittleEndian.Uint16(p)) + c
			if c > 0xffff || v > 0xffff {
				return i
			}
			binary.LittleEndian.PutUint16(p, uint16(v))
		}
	case 2:
		dst := d[s<<2 : (s+len(src))<<2]
		for i, c := range src {
			p := dst[i<<2:]
			v := uint64(binary.LittleEndian.Uint32(p)) + c
			if c > 0xffffffff || v > 0xffffffff {
				return i
			}
			binary.LittleEndian.PutUint32(p, uint32(v))
		}
	default:
		dst := d[s<<3 : (s+len(src))<<3]
		for i, c := range src {
			p := dst[i<<3:]
			binary.LittleEndian.PutUint64(p, AddCounts(binary.LittleEndian.Uint64(p), c))
		}
	}
	return len(src)
}

// Byte counters eight at a time: a word holds eight counters, one per byte lane, and the lanes are
// added or subtracted at once without carries or borrows crossing between them.

const laneTops = 0x8080808080808080 // the top bit of every byte lane

// addLanes adds the byte counters of b to those of a; ok is false if some lane overflows (the sum is
// then wrong in that lane).
func addLanes(a, b uint64) (sum uint64, ok bool) {
	sum = (a &^ laneTops) + (b &^ laneTops) // seven bits per lane: carries stop at the top bit
	sum ^= (a ^ b) & laneTops
	carry := a&b | (a|b)&^sum // a lane's carry out of its top bit
	return sum, carry&laneTops == 0
}

// subLanes subtracts the byte counters of b from those of a; ok is false if some lane of b is
// greater than a's (the difference is then wrong in that lane).
func subLanes(a, b uint64) (diff uint64, ok bool) {
	diff = ((a | laneTops) - (b &^ laneTops)) ^ ((a ^ ^b) & laneTops) // no lane borrows from the next
	borrow := ^a&b | ^(a^b)&diff                                      // a lane's borrow out of its top bit
	return diff, borrow&laneTops == 0
}
