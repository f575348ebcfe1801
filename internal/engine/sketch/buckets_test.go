package sketch

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// byteScan is usedRange the slow way: every byte of the window.
func byteScan(b *buckets) (first, last int, ok bool) {
	for i, c := range b.data {
		if c != 0 {
			if !ok {
				first = i >> b.wlog
			}
			last, ok = i>>b.wlog, true
		}
	}
	return first, last, ok
}

// usedRange against a byte-by-byte scan, on windows of every length up to 70 slots with the non-zero
// bytes anywhere, at every counter width, with the bound at its widest.
func TestUsedRangeMatchesByteScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for n := 0; n <= 70; n++ {
		for trial := range 200 {
			wlog := uint8(rng.IntN(4))
			d := make([]byte, n<<wlog)
			for range rng.IntN(3) {
				if len(d) > 0 {
					d[rng.IntN(len(d))] = byte(1 + rng.IntN(255))
				}
			}
			lo := int32(rng.IntN(100) - 50)
			b := buckets{data: d, wlog: wlog, n: int32(n), lo: lo, hlo: lo, hhi: lo + int32(n) - 1}
			first, last, ok := b.usedRange()
			wf, wl, wok := byteScan(&b)
			if ok != wok || (ok && (first != wf || last != wl)) {
				t.Fatalf("n=%d trial %d wlog=%d %v: usedRange = %d, %d, %v; want %d, %d, %v", n, trial, wlog, d, first, last, ok, wf, wl, wok)
			}
		}
	}
}

// The bound usedRange starts from must hold every non-zero counter whatever was done to the
// histogram: random inserts (growing, moving and downscaling windows, widening counters), merges at
// other scales, subtractions, copies, encoding round trips and resets, checked after every step
// against a scan of the whole window; and the bytes past the window stay zero (a reset clears only
// the bound).
func TestUsedRangeBoundHoldsThroughEveryOperation(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 11))
		value := func() float64 {
			v := math.Exp(rng.NormFloat64() * (1 + 4*rng.Float64()))
			if rng.IntN(4) == 0 {
				v = -v
			}
			return v
		}
		maxBuckets := []int{8, 64, DefaultMaxBuckets}[rng.IntN(3)]
		h := New(DefaultScale, maxBuckets)
		var parts []*Histogram // what h holds, so that Subtract has something valid to remove
		for step := range 200 {
			if rng.IntN(25) == 0 {
				h.Reset()
				parts = nil
			}
			switch op := rng.IntN(10); {
			case op < 5:
				// Parts at a coarser scale now and then: merging one downscales h, or maps its
				// indices down (i>>d) into h.
				p := New([]int32{DefaultScale, DefaultScale, DefaultScale - 1, DefaultScale - 3}[rng.IntN(4)], maxBuckets)
				for range 1 + rng.IntN(300) {
					p.Insert(value())
				}
				if rng.IntN(3) == 0 {
					p.Merge(New(int32(rng.IntN(6)), maxBuckets)) // an empty one at another scale
				}
				h.Merge(p)
				parts = append(parts, p)
			case op < 7 && len(parts) > 0:
				i := rng.IntN(len(parts))
				if h.Subtract(parts[i]) {
					parts = append(parts[:i], parts[i+1:]...)
				}
			case op == 7:
				c := New(DefaultScale, maxBuckets)
				c.CopyFrom(h)
				h = c
			case op == 8:
				var d Histogram
				if _, err := d.UnmarshalBinary(h.AppendBinary(nil)); err != nil {
					t.Fatal(err)
				}
				h = &d
			default:
				for range rng.IntN(50) {
					v := value()
					h.Insert(v)
				}
				parts = nil // inserted values are in no part: stop subtracting
			}
			for _, b := range []*buckets{&h.pos, &h.neg} {
				for i, c := range b.data[len(b.data):cap(b.data)] {
					if c != 0 {
						t.Fatalf("seed %d step %d: byte %d past the window is %d", seed, step, len(b.data)+i, c)
					}
				}
				f, l, ok := b.usedRange()
				wf, wl, wok := byteScan(b)
				if ok != wok || (ok && (f != wf || l != wl)) {
					t.Fatalf("seed %d step %d: usedRange = %d, %d, %v; the window holds %d, %d, %v (bound [%d, %d], lo %d, n %d)",
						seed, step, f, l, ok, wf, wl, wok, b.hlo, b.hhi, b.lo, b.n)
				}
			}
		}
	}
}

// The lane arithmetic against byte-by-byte sums and differences, over words made of the bytes where
// carries and borrows start (0, 1, 0x7f, 0x80, 0x81, 0xfe, 0xff) and random ones.
func TestLanesMatchBytes(t *testing.T) {
	edges := []byte{0, 1, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	rng := rand.New(rand.NewPCG(3, 3))
	word := func() (uint64, [8]byte) {
		var b [8]byte
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = edges[rng.IntN(len(edges))]
			} else {
				b[i] = byte(rng.Uint32())
			}
		}
		return binary.LittleEndian.Uint64(b[:]), b
	}
	for range 200000 {
		a, ab := word()
		b, bb := word()
		sum, addOK := addLanes(a, b)
		diff, subOK := subLanes(a, b)
		wantAdd, wantSub := true, true
		for i := range 8 {
			s, d := int(ab[i])+int(bb[i]), int(ab[i])-int(bb[i])
			lane := func(w uint64) int { return int(w >> (8 * i) & 0xff) }
			if s > 0xff {
				wantAdd = false
			} else if lane(sum) != s {
				t.Fatalf("%#x + %#x: lane %d is %#x, want %#x", a, b, i, lane(sum), s)
			}
			if d < 0 {
				wantSub = false
			} else if lane(diff) != d {
				t.Fatalf("%#x - %#x: lane %d is %#x, want %#x", a, b, i, lane(diff), d)
			}
		}
		if addOK != wantAdd || subOK != wantSub {
			t.Fatalf("%#x, %#x: add ok %v (want %v), subtract ok %v (want %v)", a, b, addOK, wantAdd, subOK, wantSub)
		}
	}
}

// addBytes and subtractBytes against byte arithmetic: where they stop (the word holding the first
// counter out of range, or that counter in the last partial word), what they changed before that and
// that they changed nothing after.
func TestAddAndSubtractBytesStopWhereACounterLeavesItsByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	edge := func() byte { return []byte{0, 0, 0, 1, 0x7f, 0x80, 0xfe, 0xff, byte(rng.Uint32())}[rng.IntN(9)] }
	for range 100000 {
		n := rng.IntN(41)
		dst, src := make([]byte, n), make([]byte, n)
		for i := range n {
			dst[i], src[i] = edge(), edge()
		}
		sub := rng.IntN(2) == 0
		want := append([]byte(nil), dst...)
		stop := n
		for i := range n {
			r := int(dst[i]) + int(src[i])
			if sub {
				r = int(dst[i]) - int(src[i])
			}
			if r < 0 || r > 0xff {
				stop = i
				if i < n&^7 {
					stop = i &^ 7
				}
				break
			}
		}
		for i := range stop {
			if sub {
				want[i] -= src[i]
			} else {
				want[i] += src[i]
			}
		}
		got := append([]byte(nil), dst...)
		var at int
		if sub {
			at = subtractBytes(got, src)
		} else {
			at = addBytes(got, src)
		}
		if at != stop || string(got) != string(want) {
			t.Fatalf("sub=%v dst %x src %x: stopped at %d with %x, want %d with %x", sub, dst, src, at, got, stop, want)
		}
	}
}
