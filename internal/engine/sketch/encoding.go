package sketch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// encodingVersion is the first byte written by AppendBinary.
//
// Version 1 layout (varint = zig-zag signed, uvarint = unsigned LEB128, as in
// encoding/binary; f64 = IEEE-754 bits, 8 bytes little-endian):
//
//	byte     version (1)
//	varint   initial scale
//	varint   scale
//	uvarint  maxBuckets
//	uvarint  count
//	uvarint  zero count
//	f64 sum, f64 min, f64 max      only when count > 0
//	positive buckets, then negative buckets, each as:
//	  varint   offset (index of the first count; 0 when there are none)
//	  uvarint  number of counts
//	  uvarint  each count (first and last non-zero)
const encodingVersion = 1

// errCorrupt is wrapped by every UnmarshalBinary error about malformed input.
var errCorrupt = errors.New("sketch: corrupt histogram encoding")

// AppendBinary appends the versioned binary encoding of h to dst.
func (h *Histogram) AppendBinary(dst []byte) []byte {
	dst = append(dst, encodingVersion)
	dst = binary.AppendVarint(dst, int64(h.initScale))
	dst = binary.AppendVarint(dst, int64(h.scale))
	dst = binary.AppendUvarint(dst, uint64(h.maxBuckets))
	dst = binary.AppendUvarint(dst, h.count)
	dst = binary.AppendUvarint(dst, h.zeroCount)
	if h.count > 0 {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(h.sum))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(h.min))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(h.max))
	}
	dst = appendSide(dst, &h.pos)
	dst = appendSide(dst, &h.neg)
	return dst
}

func appendSide(dst []byte, b *buckets) []byte {
	f, l, ok := b.usedRange()
	if !ok {
		return append(dst, 0, 0) // offset 0, no counts
	}
	dst = binary.AppendVarint(dst, int64(f)+int64(b.lo))
	dst = binary.AppendUvarint(dst, uint64(l-f+1))
	for s := f; s <= l; s++ {
		dst = binary.AppendUvarint(dst, b.get(s))
	}
	return dst
}

type decoder struct {
	b   []byte
	off int
	err error
	ctx string // "positive " or "negative " while decoding buckets
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s%s", errCorrupt, d.ctx, fmt.Sprintf(format, args...))
	}
}

// uvarint and varint return 0 when they fail, as binary.Uvarint and binary.Varint do, and after an
// earlier failure.
func (d *decoder) uvarint(what string) uint64 { return readVarint(d, what, binary.Uvarint) }
func (d *decoder) varint(what string) int64   { return readVarint(d, what, binary.Varint) }

// readVarint reads the varint what with read (binary.Uvarint or binary.Varint); n <= 0 (too few bytes,
// or more than 64 bits) fails d.
func readVarint[T uint64 | int64](d *decoder, what string, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b[d.off:])
	if n <= 0 {
		d.fail("bad %s at byte %d", what, d.off)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) float(what string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail("truncated %s at byte %d", what, d.off)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}

// side is a validated bucket run: counts live in d.b[start:end] as uvarints.
type side struct {
	offset     int
	n          int
	start, end int
	total      uint64
	wlog       uint8
}

func (d *decoder) side(what string, scale int32, maxBuckets int) side {
	d.ctx = what
	off := d.varint("offset")
	n := d.uvarint("length")
	if d.err != nil {
		return side{}
	}
	if n == 0 {
		if off != 0 {
			d.fail("offset %d without buckets", off)
		}
		return side{}
	}
	if n > uint64(maxBuckets) || n > uint64(len(d.b)-d.off) {
		d.fail("length %d too large", n)
		return side{}
	}
	if off < int64(minIndex(scale)) || off+int64(n)-1 > int64(maxIndex(scale)) {
		d.fail("buckets [%d, %d+%d) out of range at scale %d", off, off, n, scale)
		return side{}
	}
	sd := side{offset: int(off), n: int(n), start: d.off}
	var peak uint64
	for i := 0; i < sd.n; i++ {
		c := d.uvarint("count")
		if d.err != nil {
			return side{}
		}
		if c == 0 && (i == 0 || i == sd.n-1) {
			d.fail("counts not trimmed")
			return side{}
		}
		sd.total = AddCounts(sd.total, c)
		peak = max(peak, c)
	}
	sd.end = d.off
	d.ctx = ""
	for sd.wlog < 3 && peak > maxCount[sd.wlog] {
		sd.wlog++
	}
	return sd
}

// UnmarshalBinary decodes one histogram encoded by AppendBinary from the
// front of b into h (replacing its contents and configuration, reusing its
// bucket capacity) and returns the number of bytes consumed, so encodings can
// be concatenated. Malformed input yields an error wrapping errCorrupt (or
// an unsupported-version error) and leaves h unchanged; it never panics.
func (h *Histogram) UnmarshalBinary(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: empty input", errCorrupt)
	}
	if b[0] != encodingVersion {
		return 0, fmt.Errorf("sketch: unsupported histogram encoding version %d", b[0])
	}
	d := decoder{b: b, off: 1}
	initScale := d.varint("initial scale")
	scale := d.varint("scale")
	maxBuckets := d.uvarint("maxBuckets")
	count := d.uvarint("count")
	zero := d.uvarint("zero count")
	if d.err != nil {
		return 0, d.err
	}
	if initScale < int64(minScale) || initScale > int64(maxScale) {
		return 0, fmt.Errorf("%w: initial scale %d out of range", errCorrupt, initScale)
	}
	if scale < int64(minScale) || scale > initScale {
		return 0, fmt.Errorf("%w: scale %d out of range", errCorrupt, scale)
	}
	if maxBuckets < minMaxBuckets || maxBuckets > maxMaxBuckets {
		return 0, fmt.Errorf("%w: maxBuckets %d out of range", errCorrupt, maxBuckets)
	}
	var sum float64
	lo, hi := math.Inf(1), math.Inf(-1)
	if count > 0 {
		sum = d.float("sum")
		lo = d.float("min")
		hi = d.float("max")
		if d.err == nil && !(lo <= hi && !math.IsInf(lo, 0) && !math.IsInf(hi, 0)) {
			d.fail("bad min/max %v/%v", lo, hi)
		}
	}
	pos := d.side("positive ", int32(scale), int(maxBuckets))
	neg := d.side("negative ", int32(scale), int(maxBuckets))
	if d.err != nil {
		return 0, d.err
	}
	if AddCounts(AddCounts(zero, pos.total), neg.total) != count { // saturated alike (see AddCounts)
		return 0, fmt.Errorf("%w: bucket counts do not add up to count %d", errCorrupt, count)
	}

	h.configure(int32(initScale), int(maxBuckets))
	h.setScale(int32(scale))
	h.count, h.zeroCount = count, zero
	h.sum, h.min, h.max = sum, lo, hi
	fillSide(&h.pos, b, pos, int(maxBuckets))
	fillSide(&h.neg, b, neg, int(maxBuckets))
	return d.off, nil
}

func fillSide(dst *buckets, b []byte, sd side, maxSlots int) {
	dst.reinit(sd.wlog, sd.offset, sd.n, maxSlots)
	if sd.n > 0 {
		dst.note(sd.offset)
		dst.note(sd.offset + sd.n - 1)
	}
	base := sd.offset - int(dst.lo)
	p := b[sd.start:sd.end]
	for i := 0; i < sd.n; i++ {
		c, n := binary.Uvarint(p)
		p = p[n:]
		dst.set(base+i, c)
	}
}
