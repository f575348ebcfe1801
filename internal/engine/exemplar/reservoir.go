// Package exemplar keeps example spans of a data point's values: the span with the greatest value,
// and a uniform random sample of the others, in a reservoir that merges, so that the reservoirs of a
// series' panes make the one of a window, or of a cumulative point, without the spans themselves.
//
// The sample is bottom-k: each span comes with a random priority, and the reservoir keeps the k with
// the lowest priorities. Those of a union are the lowest of the two reservoirs' together, so a merge
// keeps exactly what one reservoir offered every span would have kept, and with independent uniform
// priorities every k-subset of the spans is equally likely.
package exemplar

import (
	"encoding/binary"
	"errors"
	"math"
)

// Exemplar is one span kept as an example.
type Exemplar struct {
	TraceID [16]byte
	SpanID  [8]byte
	Value   float64 // in the aggregation's unit
	Time    int64   // the span's end, Unix nanoseconds
	// Priority orders the sample: the reservoir keeps the lowest. The caller draws it uniformly at
	// random for each span, once.
	Priority uint64
}

// Reservoir holds the exemplar with the greatest value (the first of equals) and up to Size-1 of the
// others, those with the lowest priorities. The zero Reservoir is empty and holds at most one.
//
// What Offer reads of a span it does not take, most of a busy pane's, lies in the first 48 bytes:
// hasMax, full, bar and the greatest value.
type Reservoir struct {
	hasMax bool
	full   bool   // the sample holds size-1
	bar    uint64 // with full: the highest priority in the sample, which a span must be below to enter
	max    Exemplar
	sample []Exemplar // unordered; at most size-1
	worst  int        // index in sample of its highest priority, once sample is full
	size   int
}

// New returns an empty reservoir of size exemplars at most (size >= 1).
func New(size int) *Reservoir {
	r := &Reservoir{}
	r.Init(size)
	return r
}

// Len is the number of exemplars held.
func (r *Reservoir) Len() int {
	if !r.hasMax {
		return 0
	}
	return 1 + len(r.sample)
}

// Max returns the exemplar with the greatest value, and whether there is one.
func (r *Reservoir) Max() (Exemplar, bool) { return r.max, r.hasMax }

// AppendTo appends every exemplar held to dst: the greatest first, then the sample in no fixed order.
func (r *Reservoir) AppendTo(dst []Exemplar) []Exemplar {
	if !r.hasMax {
		return dst
	}
	dst = append(dst, r.max)
	return append(dst, r.sample...)
}

// same reports whether e is the span that x is: one priority (which the span's ids give) and one pair of
// ids.
func (x *Exemplar) same(e *Exemplar) bool {
	return x.Priority == e.Priority && x.SpanID == e.SpanID && x.TraceID == e.TraceID
}

// PriorityOf is a span's priority drawn from its ids: a mix of every bit of them, so that spans with
// distinct ids get priorities that are as good as independent and uniform, whatever their values, and
// one span gets the same priority wherever and whenever it is offered (in a restored reservoir, or
// in another collector's).
func PriorityOf(traceID [16]byte, spanID [8]byte) uint64 {
	h := mix(binary.LittleEndian.Uint64(spanID[:]))
	h = mix(h ^ binary.LittleEndian.Uint64(traceID[:8]))
	return mix(h ^ binary.LittleEndian.Uint64(traceID[8:]))
}

// mix is the finalizer of SplitMix64: a bijection of 64 bits in which each input bit flips each
// output bit with probability close to one half.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Offer considers one span.
func (r *Reservoir) Offer(e Exemplar) {
	if r.full && r.hasMax && e.Value <= r.max.Value && e.Priority >= r.bar {
		return // neither the greatest nor in the sample
	}
	if !r.hasMax {
		r.max, r.hasMax = e, true
		return
	}
	if r.max.same(&e) {
		return // a span offered again (an upstream retry): kept once
	}
	if e.Value > r.max.Value {
		e, r.max = r.max, e // the former greatest is one of the others now
	}
	r.offerOther(e)
}

// offerOther considers a span that is not the greatest for the sample.
func (r *Reservoir) offerOther(e Exemplar) {
	limit := max(r.size, 1) - 1
	if limit == 0 {
		return
	}
	for i := range r.sample {
		if r.sample[i].same(&e) {
			return
		}
	}
	if len(r.sample) < limit {
		if r.sample == nil {
			r.sample = make([]Exemplar, 0, limit) // at once: a busy pane fills it
		}
		r.sample = append(r.sample, e)
		if len(r.sample) == limit {
			r.findWorst()
		}
		return
	}
	if e.Priority < r.bar {
		r.sample[r.worst] = e
		r.findWorst()
	}
}

// findWorst finds the sample's highest priority, which is full.
func (r *Reservoir) findWorst() {
	r.worst = 0
	for i := 1; i < len(r.sample); i++ {
		if r.sample[i].Priority > r.sample[r.worst].Priority {
			r.worst = i
		}
	}
	r.full, r.bar = true, r.sample[r.worst].Priority
}

// Merge adds what o holds, as if every span offered to o had been offered to r (o is unchanged).
func (r *Reservoir) Merge(o *Reservoir) {
	if !o.hasMax {
		return
	}
	r.Offer(o.max)
	for _, e := range o.sample {
		r.offerOther(e)
	}
}

// Init empties the reservoir and makes its size size, keeping its memory.
func (r *Reservoir) Init(size int) {
	r.size = max(size, 1)
	if cap(r.sample) > 2*r.size { // one of a larger reservoir, reused: let the memory go
		r.sample = nil
	}
	r.Reset()
}

// Reset empties the reservoir, keeping its size and memory.
func (r *Reservoir) Reset() {
	r.hasMax = false
	r.sample = r.sample[:0]
	r.full, r.bar = r.size <= 1, 0 // size 1: no sample, so every span but a greater one is turned away
}

// exemplarBytes is the encoded size of one exemplar.
const exemplarBytes = 16 + 8 + 8 + 8 + 8

// AppendBinary appends the reservoir's exemplars to dst: a count, then each exemplar, the greatest
// first. The size is not encoded: the configuration gives it.
func (r *Reservoir) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.Len()))
	if !r.hasMax {
		return dst
	}
	dst = appendExemplar(dst, &r.max)
	for i := range r.sample {
		dst = appendExemplar(dst, &r.sample[i])
	}
	return dst
}

// ErrCorrupt says that encoded exemplars are truncated or do not fit the reservoir.
var ErrCorrupt = errors.New("exemplars are truncated or corrupt")

// Decode replaces the reservoir's exemplars with those AppendBinary wrote at the start of b, and
// returns the rest of b. More exemplars than the reservoir's size, a value that is not finite, or a
// greatest that is not the greatest, are refused.
func (r *Reservoir) Decode(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(max(r.size, 1)) || n*exemplarBytes > uint64(len(b)-w) {
		return nil, ErrCorrupt
	}
	b = b[w:]
	r.Reset()
	for i := range n {
		var e Exemplar
		copy(e.TraceID[:], b)
		copy(e.SpanID[:], b[16:])
		e.Value = math.Float64frombits(binary.LittleEndian.Uint64(b[24:]))
		e.Time = int64(binary.LittleEndian.Uint64(b[32:]))
		e.Priority = binary.LittleEndian.Uint64(b[40:])
		b = b[exemplarBytes:]
		if math.IsNaN(e.Value) || math.IsInf(e.Value, 0) || (i > 0 && e.Value > r.max.Value) {
			r.Reset()
			return nil, ErrCorrupt
		}
		if i == 0 {
			r.max, r.hasMax = e, true
			continue
		}
		r.sample = append(r.sample, e)
	}
	if limit := max(r.size, 1) - 1; limit > 0 && len(r.sample) == limit {
		r.findWorst()
	}
	return b, nil
}

// AppendList appends exemplars as AppendBinary does a reservoir holding exactly them.
func AppendList(dst []byte, exs []Exemplar) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(exs)))
	greatest := 0
	for i := range exs {
		if exs[i].Value > exs[greatest].Value {
			greatest = i
		}
	}
	for i := range exs {
		if i == greatest {
			dst = appendExemplar(dst, &exs[i])
		}
	}
	for i := range exs {
		if i != greatest {
			dst = appendExemplar(dst, &exs[i])
		}
	}
	return dst
}

func appendExemplar(dst []byte, e *Exemplar) []byte {
	dst = append(dst, e.TraceID[:]...)
	dst = append(dst, e.SpanID[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(e.Value))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(e.Time))
	return binary.LittleEndian.AppendUint64(dst, e.Priority)
}
