package sketch

import (
	"encoding/binary"
	"slices"
)

// Exporting a histogram with at most a given number of buckets per sign, at the finest scale that
// allows it: what an OpenTelemetry SDK does with its max_size (160 by default), so that a consumer
// gets a histogram of the size it expects while the sketch itself keeps its finer scale for
// quantiles.

// ScaleFor returns the finest scale, at most h's, at which the occupied buckets of each sign span at
// most maxBuckets indices (and at least minScale).
func (h *Histogram) ScaleFor(maxBuckets int) int32 {
	maxBuckets = max(maxBuckets, 1)
	k := int32(0)
	for _, b := range []*buckets{&h.pos, &h.neg} {
		lo, hi, ok := b.indexRange()
		if !ok {
			continue
		}
		for h.scale-k > minScale && spanAt(lo, hi, uint(k)) > maxBuckets {
			k++
		}
	}
	return h.scale - k
}

// AppendPositiveCountsAt appends the positive bucket counts at scale s (at most Scale()) from the
// first to the last occupied bucket, and returns the index of the first (0 when none is occupied):
// the Offset and BucketCounts of an OTLP exponential histogram at scale s.
func (h *Histogram) AppendPositiveCountsAt(dst []uint64, s int32) (int32, []uint64) {
	return appendCountsAt(dst, &h.pos, h.scale-s)
}

// AppendNegativeCountsAt is AppendPositiveCountsAt for the negative buckets.
func (h *Histogram) AppendNegativeCountsAt(dst []uint64, s int32) (int32, []uint64) {
	return appendCountsAt(dst, &h.neg, h.scale-s)
}

// appendCountsAt merges every 2^k adjacent buckets of b: index i becomes i>>k (floor division, so
// that bucket (base^i, base^(i+1)] lands in the coarser bucket that contains it).
func appendCountsAt(dst []uint64, b *buckets, k int32) (int32, []uint64) {
	f, l, ok := b.usedRange()
	if !ok {
		return 0, dst
	}
	if k <= 0 {
		return int32(f) + b.lo, appendCounts(dst, b)
	}
	lo := int(b.lo)
	first, last := (lo+f)>>k, (lo+l)>>k
	n := len(dst)
	dst = slices.Grow(dst, last-first+1)[:n+last-first+1]
	out := dst[n:]
	clear(out)
	if b.wlog == 0 {
		sumBytesAt(out, b.data[f:l+1], lo+f, uint(k), first)
		return int32(first), dst
	}
	for s := f; s <= l; s++ {
		if c := b.get(s); c != 0 {
			out[(lo+s)>>k-first] = AddCounts(out[(lo+s)>>k-first], c)
		}
	}
	return int32(first), dst
}

// appendCounts appends the counts of b from its first to its last occupied bucket.
func appendCounts(dst []uint64, b *buckets) []uint64 {
	f, l, ok := b.usedRange()
	if !ok {
		return dst
	}
	for s := f; s <= l; s++ {
		dst = append(dst, b.get(s))
	}
	return dst
}

// Lane masks for summing the bytes of a word in parallel.
const (
	evenBytes = 0x00ff00ff00ff00ff
	evenPairs = 0x0000ffff0000ffff
)

// sumBytesAt adds byte counters d, the first at bucket index base, into out[i>>k - first]. Eight
// counters whose indices start at a multiple of 8 are read as one word: a zero word (most of a sparse
// sketch) costs one test, and the bytes of a word are summed in parallel: pairs for k = 1, fours for
// k = 2, all eight for k >= 3, where the whole word lies in one merged bucket.
func sumBytesAt(out []uint64, d []byte, base int, k uint, first int) {
	i := 0
	for ; i < len(d) && (base+i)&7 != 0; i++ { // up to the first aligned word
		out[(base+i)>>k-first] += uint64(d[i])
	}
	for ; i+8 <= len(d); i += 8 {
		w := binary.LittleEndian.Uint64(d[i:])
		if w == 0 {
			continue
		}
		j := (base+i)>>k - first
		pairs := w&evenBytes + (w>>8)&evenBytes // four 16-bit sums of two counters
		switch k {
		case 1:
			out[j] += pairs & 0xffff
			out[j+1] += (pairs >> 16) & 0xffff
			out[j+2] += (pairs >> 32) & 0xffff
			out[j+3] += pairs >> 48
		case 2:
			fours := pairs&evenPairs + (pairs>>16)&evenPairs // two 32-bit sums of four counters
			out[j] += fours & 0xffffffff
			out[j+1] += fours >> 32
		default:
			fours := pairs&evenPairs + (pairs>>16)&evenPairs
			out[j] += fours&0xffffffff + fours>>32
		}
	}
	for ; i < len(d); i++ {
		out[(base+i)>>k-first] += uint64(d[i])
	}
}
