package stream

import "github.com/windowaggregator/windowaggregator/internal/engine/hll"

// Distinct is the distinct:<key> output's accumulator: the number of distinct identifiers among the
// records (Value), exact up to hll.ExactMax and estimated above (internal/engine/hll). A record
// without one (id 0) is left out; weights do not multiply it; panes merge as a union.
type Distinct struct {
	set hll.Sketch
}

// DistinctKind is the kind of a distinct:<key> output that takes the records' identifier id (see
// Record.IDs).
func DistinctKind(id int) AccumulatorKind {
	return AccumulatorKind{Name: "distinct", New: func() Accumulator { return new(Distinct) }, ID: id, Bytes: hll.MaxBytes + 64}
}

func (d *Distinct) Add(_ float64, _ bool, _ uint64, id uint64) {
	if id != 0 {
		d.set.Insert(id)
	}
}

func (d *Distinct) AddDist(_ *Distribution, id uint64) { d.Add(0, false, 1, id) }

func (d *Distinct) Merge(o Accumulator) { d.set.Merge(&o.(*Distinct).set) }

func (d *Distinct) Reset() { d.set.Reset() }

func (d *Distinct) Value() float64 { return d.set.Estimate() }

func (d *Distinct) AppendBinary(b []byte) []byte { return d.set.AppendBinary(b) }

func (d *Distinct) Decode(b []byte) ([]byte, error) { return d.set.Decode(b) }
