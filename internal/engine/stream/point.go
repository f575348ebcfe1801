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
//
// With early results (Config.EarlyResults), an early result's point is, cumulative, the running
// totals with the window so far (Start unchanged); delta, the records the window took since its
// previous result, from that result's time (Start) to the early result's (Result.End), so that a
// window's points add up to its records: its final point carries the rest.
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

	// With early results: what the series' early results of its open window have carried so far
	// (see shard.emitEarly and sentOf); nil before the first.
	early *earlySent
}

// earlySent is what the early results of the window starting at start have sent (start is minTime
// once it has fired): the pane's totals, its sketch and its bucket counts when the last was made, at
// time at; a delta point carries what the pane holds beyond them, from at.
type earlySent struct {
	start, at int64
	total     totals
	hist      *sketch.Histogram // with Aggregation.Histogram
	counts    []uint64          // with Aggregation.Bounds
}

// sentOf returns what the early results of the window starting at start have sent, or nil for none.
func (ac *accrual) sentOf(start int64) *earlySent {
	if ac == nil || ac.early == nil || ac.early.start != start {
		return nil
	}
	return ac.early
}

func (ac *accrual) folded() bool { return ac != nil && ac.fold.count > 0 }
