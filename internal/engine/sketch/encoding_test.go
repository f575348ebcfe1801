package sketch

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func sampleHistograms() []*Histogram {
	rng := rand.New(rand.NewPCG(51, 52))
	var hs []*Histogram
	hs = append(hs, New(DefaultScale, DefaultMaxBuckets))                        // empty
	hs = append(hs, fill(New(DefaultScale, DefaultMaxBuckets), []float64{0, 0})) // zeros only
	hs = append(hs, fill(New(DefaultScale, DefaultMaxBuckets), latency(rng, 1000, 1)))
	hs = append(hs, fill(New(DefaultScale, 32), mixedValues(rng, 3000, 4)))
	hs = append(hs, fill(New(-3, 8), mixedValues(rng, 100, 20)))
	hs = append(hs, fill(New(14, DefaultMaxBuckets), []float64{1e-9, 1e-9 * 1.0001, -2}))
	hs = append(hs, fill(New(maxScale, minMaxBuckets), []float64{math.MaxFloat64, -math.SmallestNonzeroFloat64}))
	hs = append(hs, withCount(10, 6_000_000_000))
	big := withCount(0.001, 70000)
	big.Insert(-5)
	hs = append(hs, big)
	return hs
}

func TestEncodingRoundTrip(t *testing.T) {
	var stream []byte
	hs := sampleHistograms()
	for _, h := range hs {
		stream = h.AppendBinary(stream)
	}
	// Decode the concatenation, reusing one target.
	var d Histogram
	off := 0
	for i, h := range hs {
		n, err := d.UnmarshalBinary(stream[off:])
		if err != nil {
			t.Fatalf("histogram %d: %v", i, err)
		}
		if n != len(h.AppendBinary(nil)) {
			t.Fatalf("histogram %d: consumed %d bytes, encoding has %d", i, n, len(h.AppendBinary(nil)))
		}
		off += n
		if !d.equal(h) || d.maxBuckets != h.maxBuckets || d.initScale != h.initScale {
			t.Fatalf("histogram %d: round trip differs", i)
		}
		// The decoded histogram keeps working like the original.
		c := h.clone()
		c.Insert(3.25)
		d.Insert(3.25)
		if !d.equal(c) {
			t.Fatalf("histogram %d: decoded histogram behaves differently", i)
		}
		if q1, q2 := d.Quantile(0.9), c.Quantile(0.9); math.Float64bits(q1) != math.Float64bits(q2) {
			t.Fatalf("histogram %d: quantile %v vs %v", i, q1, q2)
		}
	}
	if off != len(stream) {
		t.Fatalf("consumed %d of %d", off, len(stream))
	}
}

func TestEncodingCompact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	h := fill(New(DefaultScale, DefaultMaxBuckets), latency(rng, 1000, 1))
	buckets := len(h.appendPositiveCounts(nil))
	if n := len(h.AppendBinary(nil)); n > buckets+48 {
		t.Fatalf("encoding of %d buckets takes %d bytes", buckets, n)
	}
	if h.AppendBinary(nil)[0] != encodingVersion {
		t.Fatal("version byte")
	}
}

func TestUnmarshalTruncated(t *testing.T) {
	for i, h := range sampleHistograms() {
		enc := h.AppendBinary(nil)
		for cut := 0; cut < len(enc); cut++ {
			var d Histogram
			if n, err := d.UnmarshalBinary(enc[:cut]); err == nil {
				t.Fatalf("histogram %d cut at %d/%d: no error (n=%d)", i, cut, len(enc), n)
			}
		}
	}
}

func TestUnmarshalErrorsLeaveTargetUnchanged(t *testing.T) {
	h := fill(New(DefaultScale, DefaultMaxBuckets), []float64{1, 2, 3, -4})
	before := h.clone()
	bad := [][]byte{
		nil,
		{2},                                 // unknown version
		{1, 0x7f},                           // scale out of range
		{1, 12, 14, 0x80, 0x20},             // scale above initial scale
		{1, 12, 12, 1},                      // maxBuckets too small
		{1, 12, 12, 0x80, 0x20, 1, 0, 0, 0}, // count 1 but no min/max bytes
		absurdLength(),
		untrimmed(),
		countMismatch(),
		{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // varint overflow
	}
	for i, b := range bad {
		_, err := h.UnmarshalBinary(b)
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if i > 1 && !errors.Is(err, errCorrupt) {
			t.Fatalf("case %d: %v does not wrap errCorrupt", i, err)
		}
		if !h.equal(before) {
			t.Fatalf("case %d: failed unmarshal modified the target", i)
		}
	}
}

// header encodes version, scales 6/6, maxBuckets 4096, count, zero count and
// sum/min/max = 1.
func header(count, zero uint64) []byte {
	b := []byte{encodingVersion}
	b = binary.AppendVarint(b, 6)
	b = binary.AppendVarint(b, 6)
	b = binary.AppendUvarint(b, 4096)
	b = binary.AppendUvarint(b, count)
	b = binary.AppendUvarint(b, zero)
	for range 3 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(1))
	}
	return b
}

func absurdLength() []byte {
	b := header(5, 0)
	b = binary.AppendVarint(b, 0)
	b = binary.AppendUvarint(b, 1<<40)
	return append(b, 1, 1, 1, 1, 1)
}

func untrimmed() []byte {
	b := header(2, 0)
	b = binary.AppendVarint(b, 0)
	b = append(b, 3, 1, 1, 0) // trailing zero count
	return append(b, 0, 0)
}

func countMismatch() []byte {
	b := header(5, 1)
	b = binary.AppendVarint(b, 0)
	b = append(b, 2, 1, 1)
	return append(b, 0, 0)
}

func TestUnmarshalGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	encs := [][]byte{}
	for _, h := range sampleHistograms() {
		encs = append(encs, h.AppendBinary(nil))
	}
	var d Histogram
	for i := 0; i < 20000; i++ {
		var b []byte
		if i%2 == 0 {
			b = make([]byte, rng.IntN(64))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			if len(b) > 0 && rng.IntN(2) == 0 {
				b[0] = encodingVersion
			}
		} else {
			// Mutate a valid encoding.
			b = append([]byte(nil), encs[rng.IntN(len(encs))]...)
			for range 1 + rng.IntN(3) {
				if len(b) > 0 {
					b[rng.IntN(len(b))] = byte(rng.Uint32())
				}
			}
		}
		checkDecode(t, &d, b)
	}
}

// checkDecode decodes b; on success the result must re-encode, decode to an
// equal histogram and keep working.
func checkDecode(t *testing.T, d *Histogram, b []byte) {
	n, err := d.UnmarshalBinary(b)
	if err != nil {
		return
	}
	if n <= 0 || n > len(b) {
		t.Fatalf("consumed %d of %d", n, len(b))
	}
	enc := d.AppendBinary(nil)
	var e Histogram
	m, err := e.UnmarshalBinary(enc)
	if err != nil || m != len(enc) || !e.equal(d) {
		t.Fatalf("re-decode: %v (%d/%d) of %x", err, m, len(enc), b)
	}
	_ = d.Quantile(0.5)
	d.Insert(1.5)
	d.Insert(-1e300)
	e.Merge(d)
	if e.Count() != 2*d.Count()-2 {
		t.Fatalf("merge count %d, %d", e.Count(), d.Count())
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, h := range sampleHistograms() {
		f.Add(h.AppendBinary(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add(absurdLength())
	f.Add(untrimmed())
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Histogram
		checkDecode(t, &d, b)
	})
}
