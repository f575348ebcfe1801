package stream

import (
	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

// Point is what a Result carries for the additive outputs (count, sum and the histograms), as the
// engine's Config asks:
//   - delta: the records of one slide, [Start, Result.End), so that the points of a series never
//     overlap, for sliding windows too;
//   - cumulative: the series' running totals since Start, which stays the same while the series lives.
//
// With FoldLate, what late records add goes into the series' next point. Without it (revise), a late
// firing's point is the late records of the window's newest slide alone, and a late record whose own
// slide can no longer fire late goes into the next point.
type Point struct {
	Start      int64
	Count      uint64
	ValueCount uint64  // finite values behind Sum
	Sum        float64 // of finite values
	// Min and Max are the least and greatest of those values, with ValueCount > 0; -Inf and +Inf when
	// a distribution among them did not say (see Distribution).
	Min, Max float64
	// Hist is the values' sketch, with Aggregation.Histogram; BucketCounts the counts of the explicit
	// buckets, with Aggregation.Bounds: len(Bounds)+1 of them, bucket i holding the values in
	// (Bounds[i-1], Bounds[i]].
	Hist         *sketch.Histogram
	BucketCounts []uint64
	// Exemplars, with Aggregation.Exemplars, are up to that many of the point's records that came with
	// a span (for cumulative output, of those since the series' previous point): the one with the
	// greatest value, and a uniform sample of the others, in order of time.
	Exemplars []exemplar.Exemplar
}

// accrual is what a series adds up beyond its panes: the late records waiting for its next point,
// and, with cumulative output, its running totals. Series that need neither have none.
type accrual struct {
	fold       totals
	foldHist   *sketch.Histogram
	foldCounts []uint64
	foldEx     *exemplar.Reservoir // with Aggregation.Exemplars, made on first use
	// foldFirst is the start of the earliest pane of a record in fold (while fold holds any): the
	// data of a cumulative series' first point may have come late, and its panes be gone by then.
	foldFirst int64

	cum       totals
	cumHist   *sketch.Histogram
	cumCounts []uint64
	start     int64 // the start of the first window the series had data in
	// lastEnd is the end of the newest slide that held a record of the series once its panes are gone:
	// a cumulative series lives until series_expiration past it.
	lastEnd int64
	started bool // cum has taken a point
}

func (ac *accrual) folded() bool { return ac != nil && ac.fold.count > 0 }
