package stream

import (
	"encoding/binary"
	"math"
)

// Spread is the stddev and stdvar outputs' accumulator: the population variance of the finite values
// (Value), a value of weight n counting as n equal values; distributions add nothing. It keeps the
// weighted count, the mean and the sum of squared deviations from it, updated by Welford's method and
// merged by Chan, Golub and LeVeque's formula, so that values sharing a large offset (10^6 ± 1) lose
// nothing to cancellation, as a running sum of squares would.
type Spread struct {
	n    uint64  // values, weighted
	mean float64 // of the values
	m2   float64 // sum of the squared deviations from mean, each times its weight
}

// SpreadKind is the kind of the stddev and stdvar outputs.
var SpreadKind = AccumulatorKind{Name: "spread", New: func() Accumulator { return new(Spread) }, ID: -1, Bytes: 24 + 16}

func (s *Spread) Add(v float64, hasValue bool, n uint64, _ uint64) {
	if !hasValue || n == 0 {
		return
	}
	s.n += n
	w, total := float64(n), float64(s.n)
	d := v - s.mean
	s.mean += d * w / total
	// d and v - mean have the same sign, but rounding can make their product a hair below 0 when
	// v is at the mean: m2 is kept at 0 or above, as a variance is.
	s.m2 = max(s.m2+d*(v-s.mean)*w, 0)
}

func (s *Spread) AddDist(*Distribution, uint64) {}

func (s *Spread) Merge(o Accumulator) {
	b := o.(*Spread)
	switch {
	case b.n == 0:
		return
	case s.n == 0:
		*s = *b
		return
	}
	na, nb := float64(s.n), float64(b.n)
	total := na + nb
	d := b.mean - s.mean
	s.mean += d * nb / total
	s.m2 += b.m2 + d*d*na*nb/total
	s.n += b.n
}

func (s *Spread) Reset() { *s = Spread{} }

// Value is the variance: 0 for one value (or none).
func (s *Spread) Value() float64 {
	if s.n == 0 {
		return 0
	}
	return s.m2 / float64(s.n)
}

func (s *Spread) AppendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, s.n)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.mean))
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(s.m2))
}

func (s *Spread) Decode(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || len(b)-k < 16 {
		return b, errCorrupt
	}
	b = b[k:]
	mean, m2 := math.Float64frombits(binary.LittleEndian.Uint64(b)), math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
	if math.IsNaN(mean) || math.IsInf(mean, 0) || !(m2 >= 0) || math.IsInf(m2, 0) {
		return b, errCorrupt
	}
	*s = Spread{n: n, mean: mean, m2: m2}
	return b[16:], nil
}
