package stream

import (
	"math"

	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

// The scalar outputs' state (count, sum, avg, min, max): totals, what a record adds to them, their
// merge across a window's panes, and their encoding in a snapshot.

// totals are the scalar aggregates of a set of records (a pane's, a series' head's or a window's): their
// count, and the count, sum, min and max of their finite values. A record of weight n counts as n
// records of its value. Counts saturate at 2^64-1 (sketch.AddCounts).
type totals struct {
	count      uint64  // records, weighted
	valueCount uint64  // records with a finite value, weighted
	sum        float64 // of the values, each times its weight
	min, max   float64 // of the values; meaningful when valueCount > 0
}

// add counts a record of value v and weight n; hasValue says v is finite.
func (t *totals) add(v float64, hasValue bool, n uint64) {
	t.count = sketch.AddCounts(t.count, n)
	if !hasValue {
		return
	}
	// Values are finite (NaN never gets here), so plain comparisons do what math.Min and math.Max
	// would, faster.
	if t.valueCount == 0 || v < t.min {
		t.min = v
	}
	if t.valueCount == 0 || v > t.max {
		t.max = v
	}
	t.valueCount = sketch.AddCounts(t.valueCount, n)
	t.sum += v * float64(n) // exact for n = 1: an unweighted record's sum is what adding v makes
}

// addDist counts a distribution of d.Count values (with d.NoValues, in count alone). Its min and max,
// when it has none, are unknown: -Inf and +Inf, which no record or merge replaces, so that totals with
// one unknown extreme report none rather than the extreme of the others.
func (t *totals) addDist(d *Distribution) {
	t.count = sketch.AddCounts(t.count, d.Count)
	if d.Count == 0 || d.NoValues {
		return
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if d.HasMinMax {
		lo, hi = d.Min, d.Max
	}
	if t.valueCount == 0 || lo < t.min {
		t.min = lo
	}
	if t.valueCount == 0 || hi > t.max {
		t.max = hi
	}
	t.valueCount = sketch.AddCounts(t.valueCount, d.Count)
	t.sum += d.Sum
}

// item is what one record adds, for the paths that take both kinds of record: n records of value v
// (hasValue: v is finite), or the distribution dist.
type item struct {
	v        float64
	n        uint64
	hasValue bool
	dist     *Distribution
	ids      []uint64 // the record's identifiers (Record.IDs), for the accumulators
}

func (t *totals) addItem(it *item) {
	if it.dist != nil {
		t.addDist(it.dist)
		return
	}
	t.add(it.v, it.hasValue, it.n)
}

func (t *totals) merge(o *totals) {
	t.count = sketch.AddCounts(t.count, o.count)
	if o.valueCount == 0 {
		return
	}
	if t.valueCount == 0 || o.min < t.min {
		t.min = o.min
	}
	if t.valueCount == 0 || o.max > t.max {
		t.max = o.max
	}
	t.valueCount = sketch.AddCounts(t.valueCount, o.valueCount)
	t.sum += o.sum
}

// minus returns the totals of the records in t and not in o, a subset of them: the counts and the
// sum exactly (but for saturated counts), the min and max unknown (-Inf and +Inf) unless o is empty.
func (t *totals) minus(o *totals) totals {
	if o.count == 0 {
		return *t
	}
	d := totals{count: t.count - o.count, valueCount: t.valueCount - o.valueCount, sum: t.sum - o.sum}
	if d.valueCount > 0 {
		d.min, d.max = math.Inf(-1), math.Inf(1)
	}
	return d
}

func encodeTotals(enc *encoder, t *totals) {
	enc.uvarint(t.count)
	enc.uvarint(t.valueCount)
	enc.float(t.sum)
	enc.float(t.min)
	enc.float(t.max)
}

func decodeTotals(d *decoder, t *totals) {
	t.count, t.valueCount = d.uvarint(), d.uvarint()
	t.sum, t.min, t.max = d.float(), d.float(), d.float()
	if t.valueCount > t.count {
		d.fail()
	}
}
