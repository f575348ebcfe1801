package stream

import (
	"cmp"
	"slices"

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

// accrualOf returns the series' accrual, making it on first use.
func (s *series) accrualOf() *accrual {
	if s.ac == nil {
		s.ac = &accrual{}
	}
	return s.ac
}

// foldLate adds a late record, of the pane starting at start, to what the series' next point carries.
func (s *series) foldLate(it *item, start int64, a *Aggregation) {
	ac := s.accrualOf()
	if ac.fold.count == 0 || start < ac.foldFirst {
		ac.foldFirst = start
	}
	ac.fold.addItem(it)
	if a.Histogram {
		if ac.foldHist == nil {
			ac.foldHist = newSketch()
		}
		insertItem(ac.foldHist, it)
	}
	if a.Bounds != nil {
		if ac.foldCounts == nil {
			ac.foldCounts = make([]uint64, a.buckets())
		}
		countItem(ac.foldCounts, a.Bounds, it)
	}
}

// foldExemplar adds a late record's exemplar to what the series' next point carries, in a reservoir
// of k.
func (s *series) foldExemplar(ex *exemplar.Exemplar, k int) {
	ac := s.accrualOf()
	if ac.foldEx == nil {
		ac.foldEx = exemplar.New(k)
	}
	ac.foldEx.Offer(*ex)
}

// lastDataEnd returns the end of the newest slide that held a record of the series.
func (s *series) lastDataEnd(g *windowing) int64 {
	end := minTime
	if s.ac != nil {
		end = s.ac.lastEnd
	}
	if n := len(s.panes); n > 0 {
		end = max(end, s.panes[n-1].start+g.slide)
	}
	return end
}

// wantsPoint reports whether the series gets a point at window end e even if no window of it ends
// there: it has late records folded, or it is a cumulative series still alive at e. drain: the
// engine is emptying itself, and a live series gets no points past its data.
func (s *series) wantsPoint(e int64, g *windowing, drain bool) bool {
	if s.ac.folded() {
		return true
	}
	return g.cumulative && !drain && s.ac != nil && s.ac.started && e < s.lastDataEnd(g)+g.expiration
}

// ended reports whether the series holds nothing more to emit after watermark w: no pane, nothing
// folded, and no cumulative point left before it expires.
func (s *series) ended(w int64, g *windowing) bool {
	if len(s.panes) > 0 || s.ac.folded() {
		return false
	}
	return !g.cumulative || w >= maxTime || g.paneStart(w)+g.slide >= s.lastDataEnd(g)+g.expiration
}

// fillPoint sets r's point for the window of the series ending at e: the slide that ends there (for a
// late firing, its late records alone), what is folded, and with cumulative output the totals so far.
func (s *shard) fillPoint(se *series, r *Result, e int64, late bool) {
	g, a := &s.g, &s.aggs[se.agg]
	var part *totals
	var hist *sketch.Histogram
	var counts []uint64
	var partEx *exemplar.Reservoir
	if p := se.paneAt(e - g.slide); p != nil {
		if late {
			part, hist, counts = &p.delta, p.deltaHist, p.deltaCounts
		} else {
			part, hist, counts = &p.total, p.hist, p.counts
		}
		if p.ex != nil {
			partEx = &p.ex.all
			if late {
				partEx = &p.ex.delta
			}
		}
	}
	if late && (part == nil || part.count == 0) {
		return // nothing of the slide came late: the late firing is of the window's gauges alone
	}
	pt := &r.Point
	r.HasPoint = true
	pt.Start = e - g.slide
	var t totals
	if part != nil {
		t = *part
	}
	if a.Histogram {
		h := r.pointSketch()
		if hist != nil {
			h.Merge(hist)
		}
		pt.Hist = h
	}
	if a.Bounds != nil {
		pt.BucketCounts = r.pointCounts(a.buckets())
		if counts != nil {
			addCounts(pt.BucketCounts, counts)
		}
	}
	var ex *exemplar.Reservoir // the point's
	if a.Exemplars > 0 {
		ex = &s.pointEx
		ex.Init(a.Exemplars)
		if partEx != nil {
			ex.Merge(partEx)
		}
	}
	ac := se.ac
	first := e - g.slide // the earliest pane of the point's data, for a cumulative series' first
	if !late && ac.folded() {
		first = min(first, ac.foldFirst)
		t.merge(&ac.fold)
		if ex != nil && ac.foldEx != nil {
			ex.Merge(ac.foldEx)
			ac.foldEx.Reset()
		}
		if pt.Hist != nil && ac.foldHist != nil {
			pt.Hist.Merge(ac.foldHist)
			ac.foldHist.Reset()
		}
		if pt.BucketCounts != nil && ac.foldCounts != nil {
			addCounts(pt.BucketCounts, ac.foldCounts)
			clear(ac.foldCounts)
		}
		ac.fold = totals{}
	}
	if g.cumulative {
		ac = se.accrualOf()
		if !ac.started {
			// The start of the first window of the point's data: read from what the point takes,
			// never from the panes still held, which a late record's may have left already.
			ac.started, ac.start = true, first+g.slide-g.size
			if a.Histogram {
				ac.cumHist = newSketch()
			}
			if a.Bounds != nil {
				ac.cumCounts = make([]uint64, a.buckets())
			}
		}
		ac.cum.merge(&t)
		t = ac.cum
		pt.Start = ac.start
		if pt.Hist != nil {
			ac.cumHist.Merge(pt.Hist)
			pt.Hist.CopyFrom(ac.cumHist)
		}
		if pt.BucketCounts != nil {
			addCounts(ac.cumCounts, pt.BucketCounts)
			copy(pt.BucketCounts, ac.cumCounts)
		}
	}
	pt.Count, pt.ValueCount, pt.Sum, pt.Min, pt.Max = t.count, t.valueCount, t.sum, t.min, t.max
	if ex != nil && ex.Len() > 0 {
		pt.Exemplars = r.pointExemplars(ex)
	}
}

// byTime orders exemplars by time, then by value: a backend takes a series' exemplars in order of
// time.
func byTime(a, b exemplar.Exemplar) int {
	if c := cmp.Compare(a.Time, b.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Value, b.Value)
}
