package sketch

import (
	"encoding/binary"
	"math"
)

// Subtract removes o's values from h, for an h that holds them: a merge that included o, plus values
// inserted into both since. Bucket counts, the zero count, count and sum are subtracted exactly; min
// and max cannot be, and keep their old values (SetSummary corrects them). It reports false and leaves
// h unchanged when the subtraction cannot be exact: o is at a coarser scale than h, or some
// bucket of h holds fewer values than o puts there. A histogram emptied by Subtract is Reset, so it
// returns to its initial scale.
//
// It serves sliding windows: the sketch of the next window is the previous one plus the pane that
// enters minus the pane that leaves, instead of a merge of every pane.
func (h *Histogram) Subtract(o *Histogram) bool {
	if o == nil || o.count == 0 {
		return true
	}
	if o == h {
		h.Reset()
		return true
	}
	if o.scale < h.scale || o.count > h.count || o.zeroCount > h.zeroCount || h.count == math.MaxUint64 {
		return false // a saturated count (see AddCounts) no longer says how many values h holds
	}
	d := uint(o.scale - h.scale)
	if !subtractSide(&h.pos, &o.pos, d) {
		return false
	}
	if !subtractSide(&h.neg, &o.neg, d) {
		addBack(&h.pos, &o.pos, d, -1)
		return false
	}
	h.count -= o.count
	h.zeroCount -= o.zeroCount
	h.sum -= o.sum
	if h.count == 0 {
		h.Reset()
		return true
	}
	h.pos.tighten()
	h.neg.tighten()
	return true
}

// SetSummary sets the sum, min and max that the histogram reports (and clamps quantiles into), for a
// caller that knows them exactly, such as after Subtract.
func (h *Histogram) SetSummary(sum, minV, maxV float64) {
	h.sum, h.min, h.max = sum, minV, maxV
}

// subtractSide subtracts o's counts, mapped d scales down, from h's. On a shortfall it restores what
// it had subtracted and reports false.
func subtractSide(h, o *buckets, d uint) bool {
	of, ol, ok := o.usedRange()
	if !ok {
		return true
	}
	olo, hlo, hn := int(o.lo), int(h.lo), int(h.n)
	if d == 0 && h.wlog == 0 && o.wlog == 0 && of+olo-hlo >= 0 && ol+olo-hlo < hn {
		// Common case: byte counters at the same scale, o's range inside h's window. On a shortfall,
		// adding back what was subtracted restores h exactly (no counter can overflow: each held
		// that much before).
		src := o.data[of : ol+1]
		dst := h.data[of+olo-hlo:]
		dst = dst[:len(src)]
		if i := subtractBytes(dst, src); i < len(src) {
			addBytes(dst[:i], src[:i])
			return false
		}
		return true
	}
	for s := of; s <= ol; s++ {
		c := o.get(s)
		if c == 0 {
			continue
		}
		t := (s+olo)>>d - hlo
		if t < 0 || t >= hn || h.get(t) < c {
			addBack(h, o, d, s)
			return false
		}
		h.set(t, h.get(t)-c)
	}
	return true
}

// addBack re-adds o's counts from o's first used slot up to (not including) slot end; end < 0 means
// all of them.
func addBack(h, o *buckets, d uint, end int) {
	of, ol, ok := o.usedRange()
	if !ok {
		return
	}
	if end >= 0 {
		ol = end - 1
	}
	olo, hlo := int(o.lo), int(h.lo)
	for s := of; s <= ol; s++ {
		if c := o.get(s); c != 0 {
			t := (s+olo)>>d - hlo
			h.set(t, h.get(t)+c)
		}
	}
}

// subtractBytes subtracts byte counters src from dst, eight at a time, and stops where one would go
// below zero. It returns where it stopped, as addBytes does (len(src) when it did not), and leaves the
// counters from there on as they were. It is addBytes with the other lane operation, apart so that
// the merge's loop, the hot one, does not choose its operation at every word.
func subtractBytes(dst, src []byte) int {
	dst = dst[:len(src)]
	n := len(src) &^ 7
	for i := 0; i < n; i += 8 {
		o := binary.LittleEndian.Uint64(src[i:])
		if o == 0 {
			continue
		}
		d, ok := subLanes(binary.LittleEndian.Uint64(dst[i:]), o)
		if !ok {
			return i
		}
		binary.LittleEndian.PutUint64(dst[i:], d)
	}
	for i := n; i < len(src); i++ {
		if dst[i] < src[i] {
			return i
		}
		dst[i] -= src[i]
	}
	return len(src)
}
