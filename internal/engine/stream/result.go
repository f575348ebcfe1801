package stream

import (
	"cmp"
	"slices"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

// Result is what one series emits at one window end: a firing of its window [Start, End), its point
// for the additive outputs, or both.
//
// A first firing carries the whole window. A late firing (late set) carries Count, Sum, ValueCount and
// Hist as deltas of the late records alone, so that the firings of one window add up to the whole, and
// Avg, Min, Max and Quantiles as the corrected values of the whole window.
type Result struct {
	Agg      int
	Key      string // the series key as staged; empty for the overflow series
	Overflow bool   // the aggregation's overflow series
	Start    int64  // window start, Unix ns
	End      int64  // window end, Unix ns (exclusive)

	Count      uint64  // records (delta when late)
	Sum        float64 // of finite values (delta when late)
	ValueCount uint64  // finite values behind Sum (delta when late)

	WindowValueCount uint64  // finite values in the whole window; Avg, Min, Max and Quantiles need > 0
	WindowCount      uint64  // records in the whole window
	WindowSum        float64 // of the finite values of the whole window
	Avg, Min, Max    float64 // whole window
	Quantiles        []float64
	// Values are the figures of the aggregation's accumulators (Aggregation.Accumulators), in their
	// order, of the whole window; nil without a window.
	Values []float64
	Hist   *sketch.Histogram // nil unless the aggregation reports a histogram (delta when late)
	// MaxExemplar, with Aggregation.Exemplars and HasMaxExemplar, is the record with the greatest value
	// in the whole window among those that came with a span (the first of equals).
	MaxExemplar    exemplar.Exemplar
	HasMaxExemplar bool

	// Early: an early result of a window still open (Config.EarlyResults): its figures are those of
	// [Start, End), the window so far, End the early result's time; its point as Point says.
	Early bool

	// HasWindow: the fields above describe a window of the series (a first or a late firing). A
	// Result without one carries a point alone: a cumulative series' point at a window end where it
	// has no data, or the point that takes folded late records.
	HasWindow bool
	// HasPoint: Point holds the additive outputs' point of this window end (see Point).
	HasPoint bool
	Point    Point

	late        bool                // a firing of a window that had fired before
	histStore   *sketch.Histogram   // Hist's storage, kept across reuse
	pointStore  *sketch.Histogram   // Point.Hist's storage, likewise
	countsStore []uint64            // Point.BucketCounts' storage, likewise
	exStore     []exemplar.Exemplar // Point.Exemplars' storage, likewise
}

// reset empties r for reuse, keeping its Quantiles and Hist storage.
func (r *Result) reset() {
	q, vs, h, ph, bc, ex := r.Quantiles[:0], r.Values[:0], r.histStore, r.pointStore, r.countsStore, r.exStore
	*r = Result{Quantiles: q, Values: vs, histStore: h, pointStore: ph, countsStore: bc, exStore: ex}
}

// pointExemplars copies the exemplars of res into r's storage, in order of time.
func (r *Result) pointExemplars(res *exemplar.Reservoir) []exemplar.Exemplar {
	r.exStore = res.AppendTo(r.exStore[:0])
	slices.SortFunc(r.exStore, byTime)
	return r.exStore
}

// pointCounts returns the point's bucket counts storage: n zeros.
func (r *Result) pointCounts(n int) []uint64 {
	if cap(r.countsStore) < n {
		r.countsStore = make([]uint64, n)
	}
	r.countsStore = r.countsStore[:n]
	clear(r.countsStore)
	return r.countsStore
}

// pointSketch returns the point's sketch storage, empty.
func (r *Result) pointSketch() *sketch.Histogram {
	if r.pointStore == nil {
		r.pointStore = newSketch()
	}
	r.pointStore.Reset()
	return r.pointStore
}

// setHist makes r.Hist a copy of h.
func (r *Result) setHist(h *sketch.Histogram) {
	if r.histStore == nil {
		r.histStore = newSketch()
	}
	r.histStore.CopyFrom(h)
	r.Hist = r.histStore
}

// resultBuffer is a slice of Results whose elements keep their storage when it is emptied.
type resultBuffer struct {
	items []Result
}

func (b *resultBuffer) next() *Result {
	n := len(b.items)
	if n < cap(b.items) {
		b.items = b.items[:n+1]
	} else {
		b.items = append(b.items, Result{})
	}
	r := &b.items[n]
	r.reset()
	return r
}

// clear empties the buffer. The results' keys are dropped, since they may point into series that
// are gone (see shard.release).
func (b *resultBuffer) clear() {
	for i := range b.items {
		b.items[i].Key = ""
	}
	b.items = b.items[:0]
}

// byTime orders exemplars by time, then by value: a backend takes a series' exemplars in order of
// time.
func byTime(a, b exemplar.Exemplar) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Value, b.Value)
}
