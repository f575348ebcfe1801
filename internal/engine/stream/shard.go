package stream

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

// shard is an independently locked part of the series table, with the panes of its series, the
// watermark it has applied and the results it has produced but not yet handed out.
type shard struct {
	mu sync.Mutex
	paneMaker

	applied int64 // the watermark this shard has applied
	next    int64 // nextBoundary(applied): the watermark at which it must flush again
	dirty   bool  // some pane holds a late delta

	table    seriesTable
	overflow []*series // per aggregation; used on the engine's overflow shard only
	list     []*series
	pending  resultBuffer

	// scratch for merging panes into a window
	wTotal, wDelta   totals
	wHist, wDeltaHst *sketch.Histogram
	pointEx          exemplar.Reservoir // scratch for merging a point's exemplars
	wAccs            []*accumulators    // scratch for merging a window's accumulators, by aggregation

	windowsFired, lateFirings uint64 // firings produced, read under mu

	active []atomic.Int64 // the engine's count of regular series per aggregation
}

func newShard(g windowing, aggs []Aggregation, active []atomic.Int64) *shard {
	s := &shard{paneMaker: paneMaker{g: g, aggs: aggs}, applied: minTime, next: g.nextBoundary(minTime), active: active}
	s.overflow = make([]*series, len(aggs))
	s.wHist, s.wDeltaHst = newSketch(), newSketch()
	return s
}

// addExisting puts the value of a record of aggregation agg and weight n in pane p into the series key
// (hash h), judged against the shard's watermark w, and says what became of it and the series (nil
// for an expired record). ok is false, and nothing was done, when the series does not exist: Apply
// creates series after the rest, in the order of their records, so that the first to come get the
// max_series slots. The caller offers the record's exemplar, if it has one, to the series
// (addExemplar): the hot path of an engine without exemplars does nothing more than it did without
// them.
func (s *shard) addExisting(w int64, agg int, h uint64, key []byte, p int64, v float64, n uint64) (vd Verdict, se *series, ok bool) {
	vd, se, ok = s.lookup(w, agg, h, key, p)
	if se != nil {
		s.addValue(se, p, v, n, vd)
	}
	return vd, se, ok
}

// lookup judges a record of aggregation agg in pane p against the shard's watermark w, and finds its
// series key (hash h): nil for an expired record, which no series takes; ok is false when the series
// does not exist (see addExisting).
func (s *shard) lookup(w int64, agg int, h uint64, key []byte, p int64) (vd Verdict, se *series, ok bool) {
	vd = s.g.classify(p, w)
	if vd == Expired {
		return vd, nil, true
	}
	se = s.table.find(h, agg, key)
	return vd, se, se != nil
}

// addOrCreate adds item it as addExisting does, creating a missing series, with the record's
// exemplar ex (nil: none). full reports that the aggregation already holds max_series: the record is
// for the overflow series, and nothing was done.
func (s *shard) addOrCreate(w int64, agg int, h uint64, key []byte, p int64, it *item, ex *exemplar.Exemplar) (vd Verdict, full bool) {
	vd, se, ok := s.lookup(w, agg, h, key, p)
	if ok {
		if se != nil {
			s.addItem(se, p, it, vd, ex)
		}
		return vd, false
	}
	// Full: a load, which every core can share, before the add, which each core would have to take
	// the counter's cache line for (a cardinality flood sends every record here).
	limit := int64(s.aggs[agg].MaxSeries)
	if s.active[agg].Load() >= limit {
		return vd, true
	}
	if s.active[agg].Add(1) > limit {
		s.active[agg].Add(-1)
		return vd, true
	}
	se = &series{hash: h, agg: int32(agg), pos: int32(len(s.list))}
	se.setKey(key)
	s.table.insert(se)
	s.list = append(s.list, se)
	s.addItem(se, p, it, vd, ex)
	return vd, false
}

// addOverflow puts item it of aggregation agg in pane p into its overflow series (on the engine's
// overflow shard), judged against w.
func (s *shard) addOverflow(w int64, agg int, p int64, it *item, ex *exemplar.Exemplar) Verdict {
	vd := s.g.classify(p, w)
	if vd != Expired {
		s.addItem(s.overflowSeries(agg), p, it, vd, ex)
	}
	return vd
}

// overflowSeries returns the aggregation's overflow series, creating it if needed.
func (s *shard) overflowSeries(agg int) *series {
	if se := s.overflow[agg]; se != nil {
		return se
	}
	se := &series{agg: int32(agg), overflow: true, pos: int32(len(s.list))}
	s.overflow[agg] = se
	s.list = append(s.list, se)
	return se
}

// release removes a series that has ended (see series.ended); a regular one gives its slot back to
// max_series.
func (s *shard) release(se *series) {
	last := len(s.list) - 1
	s.list[se.pos] = s.list[last]
	s.list[se.pos].pos = se.pos
	s.list[last] = nil
	s.list = s.list[:last]
	if se.overflow {
		s.overflow[se.agg] = nil
		return
	}
	s.table.remove(se)
	s.active[se.agg].Add(-1)
	// The key of a result, and the attribute values taken from it, may point into the series (see
	// setKey) and outlive it: drop what the series holds, so that they keep its own bytes alive and
	// not its panes' storage and its sliding-window sketch.
	se.panes, se.acc, se.ac = nil, nil, nil
}

// addItem puts item it of pane start, judged as verdict, with its exemplar ex (nil: none), into series
// se: the value (addValue) or the distribution (addDist), then the exemplar where the value went
// (addExemplar), then the accumulators of its pane.
func (s *shard) addItem(se *series, start int64, it *item, verdict Verdict, ex *exemplar.Exemplar) {
	if it.dist != nil {
		s.addDist(se, start, it.dist, verdict)
	} else {
		s.addValue(se, start, it.v, it.n, verdict)
		if ex != nil {
			s.addExemplar(se, start, it.v, verdict, ex)
		}
	}
	if kinds := s.aggs[se.agg].Accumulators; len(kinds) > 0 {
		// The pane exists: the record's value went to it, or to the head, which is on it.
		se.pane(start, &s.paneMaker).accs.add(kinds, it)
	}
}

// addValue puts a record of pane start and weight n (n records of value v: see totals), judged as
// verdict, into series se. A NaN or infinite v is counted but left out of the value aggregates.
//
// An on-time record goes to the series' head (see series.head), which its pane becomes if it is not
// already. A late one, rare, goes to its pane at once, for the windows that have not fired yet, and
// either to what the series' next point folds in or to the delta that its late firing reports.
func (s *shard) addValue(se *series, start int64, v float64, n uint64, verdict Verdict) {
	hasValue := !math.IsNaN(v) && !math.IsInf(v, 0)
	if verdict != LateUpdate {
		if se.head.count == 0 || se.headStart != start {
			se.takeHead(start, &s.paneMaker)
		}
		se.addToHead(v, hasValue, n, &s.paneMaker)
		if start+s.g.slide <= s.applied {
			// On time for a window still to fire, after the point of its own slide: the series'
			// next point takes it.
			se.foldLate(&item{v: v, n: n, hasValue: hasValue}, start, &s.aggs[se.agg])
		}
		return
	}
	s.addLate(se, start, &item{v: v, n: n, hasValue: hasValue})
}

// addDist puts a distribution record d (a histogram data point; d.Count > 0) of pane start, judged
// as verdict, into series se, as addValue does a value.
func (s *shard) addDist(se *series, start int64, d *Distribution, verdict Verdict) {
	if verdict != LateUpdate {
		if se.head.count == 0 || se.headStart != start {
			se.takeHead(start, &s.paneMaker)
		}
		se.addDistToHead(d, &s.paneMaker)
		if start+s.g.slide <= s.applied {
			se.foldLate(&item{dist: d}, start, &s.aggs[se.agg])
		}
		return
	}
	s.addLate(se, start, &item{dist: d})
}

// addLate puts a record of pane start that is late for a fired window of it (LateUpdate) into its
// pane at once, for the windows that have not fired yet, and either into what the series' next point
// folds in or into the delta that its late firing reports.
func (s *shard) addLate(se *series, start int64, it *item) {
	// The head is not on this pane: a record is late for a pane once a window holding it has fired,
	// which happens at a flush point, which puts every head back; only an on-time record takes one.
	// Were it on it, putting it back after this record would overwrite the record in the totals: put
	// it back first, at the cost of one comparison on this rare path, rather than rely on that alone.
	if se.head.count > 0 && se.headStart == start {
		se.putHead(&s.paneMaker)
	}
	a := &s.aggs[se.agg]
	p := se.pane(start, &s.paneMaker)
	se.insertItem(p.hist, p.counts, start, it, &s.paneMaker)
	if s.g.fold {
		p.total.addItem(it)
		se.foldLate(it, start, a)
		return
	}
	p.addLate(it)
	if a.Bounds != nil && (it.hasValue || it.dist != nil && it.dist.Buckets != nil) {
		if p.deltaCounts == nil {
			p.deltaCounts = s.pool.counts.get(a.buckets())
		}
		countItem(p.deltaCounts, a.Bounds, it)
	}
	if s.g.expired(start+s.g.slide, s.applied) {
		// The window of the record's own slide can no longer fire late: its point is the next one.
		se.foldLate(it, start, a)
	}
	s.dirty = true
}

// addExemplar offers the exemplar ex of a record of value v, pane start, judged as verdict, to each
// reservoir of the places addValue puts the value in: the pane's (its slide's point and the max of
// its windows), the pane's late delta (a late firing's point), the series' fold (its next point). A
// record without a finite value gives none. It runs after addValue, which has made the pane and
// leaves what decides where a value goes (the verdict, the shard's watermark) as it was.
func (s *shard) addExemplar(se *series, start int64, v float64, verdict Verdict, ex *exemplar.Exemplar) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	p := se.pane(start, &s.paneMaker)
	p.ex.all.Offer(*ex)
	switch {
	case verdict != LateUpdate:
		if start+s.g.slide <= s.applied {
			se.foldExemplar(ex, s.aggs[se.agg].Exemplars)
		}
	case s.g.fold:
		se.foldExemplar(ex, s.aggs[se.agg].Exemplars)
	default:
		p.ex.delta.Offer(*ex)
		if s.g.expired(start+s.g.slide, s.applied) {
			se.foldExemplar(ex, s.aggs[se.agg].Exemplars)
		}
	}
}
