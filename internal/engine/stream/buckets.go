package stream

import (
	"slices"

	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

// The explicit histogram output's state: bucket counts per pane, what a record counts in them, the
// free counts of dropped panes, and their encoding in a snapshot.

// countItem counts the item's values in explicit buckets counts (nil: none) of bounds.
func countItem(counts []uint64, bounds []float64, it *item) {
	switch {
	case counts == nil:
	case it.dist != nil:
		if len(it.dist.Buckets) == len(counts) && !it.dist.NoValues {
			addCounts(counts, it.dist.Buckets)
		}
	case it.hasValue:
		i := bucketOf(bounds, it.v)
		counts[i] = sketch.AddCounts(counts[i], it.n)
	}
}

// countsFree are bucket counts of dropped panes, to be used again.
type countsFree [][]uint64

// get returns n zero bucket counts.
func (f *countsFree) get(n int) []uint64 {
	k := len(*f)
	if k == 0 {
		return make([]uint64, n)
	}
	c := (*f)[k-1]
	(*f)[k-1] = nil
	*f = (*f)[:k-1]
	clear(c)
	return c
}

func (f *countsFree) put(c []uint64) {
	if c != nil {
		*f = append(*f, c)
	}
}

// bucketOf returns the explicit bucket of finite value v: the first upper bound at or above it.
func bucketOf(bounds []float64, v float64) int {
	i, _ := slices.BinarySearch(bounds, v)
	return i
}

// addCounts adds bucket counts src to dst, each saturating (see sketch.AddCounts).
func addCounts(dst, src []uint64) {
	for i, c := range src {
		dst[i] = sketch.AddCounts(dst[i], c)
	}
}

// encodeCounts writes explicit bucket counts; nil and empty are both written as none.
func encodeCounts(enc *encoder, c []uint64) {
	enc.uvarint(uint64(len(c)))
	for _, v := range c {
		enc.uvarint(v)
	}
}

// decodeCounts reads explicit bucket counts: n of them, or none when allowNone; any other number is
// corrupt.
func decodeCounts(d *decoder, n int, allowNone bool) []uint64 {
	k := d.count(1)
	if d.err != nil || (k == 0 && allowNone) {
		return nil
	}
	if k != n {
		d.fail()
		return nil
	}
	c := make([]uint64, n)
	for i := range c {
		c[i] = d.uvarint()
	}
	return c
}
