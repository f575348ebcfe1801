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
	mu   sync.Mutex
	g    windowing
	aggs []Aggregation

	applied int64 // the watermark this shard has applied
	next    int64 // nextBoundary(applied): the watermark at which it must flush again
	dirty   bool  // some pane holds a late delta

	table    seriesTable
	overflow []*series // per aggregation; used on the engine's overflow shard only
	list     []*series
	pending  resultBuffer
	pool     sketchPool

	// scratch for merging panes into a window
	wTotal, wDelta   totals
	wHist, wDeltaHst *sketch.Histogram
	pointEx          exemplar.Reservoir // scratch for merging a point's exemplars

	windowsFired, lateFirings uint64 // firings produced, read under mu

	active []atomic.Int64 // the engine's count of regular series per aggregation
}

func newShard(g windowing, aggs []Aggregation, active []atomic.Int64) *shard {
	s := &shard{g: g, aggs: aggs, applied: minTime, next: g.nextBoundary(minTime), active: active}
	s.overflow = make([]*series, len(aggs))
	s.wHist, s.wDeltaHst = newSketch(), newSketch()
	return s
}

// observe brings the shard to watermark w (under mu) and returns the watermark to judge records by.
func (s *shard) observe(w int64) int64 {
	if w >= s.next {
		s.flush(w)
	} else if w > s.applied {
		s.applied = w
	}
	return s.applied
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
// (addExemplar).
func (s *shard) addItem(se *series, start int64, it *item, verdict Verdict, ex *exemplar.Exemplar) {
	if it.dist != nil {
		s.addDist(se, start, it.dist, verdict)
		return
	}
	s.addValue(se, start, it.v, it.n, verdict)
	if ex != nil {
		s.addExemplar(se, start, it.v, verdict, ex)
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
			se.takeHead(start, s)
		}
		se.addToHead(v, hasValue, n, s)
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
			se.takeHead(start, s)
		}
		se.addDistToHead(d, s)
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
		se.putHead(s)
	}
	a := &s.aggs[se.agg]
	p := se.pane(start, s)
	se.insertItem(p.hist, p.counts, start, it, s)
	if s.g.fold {
		p.total.addItem(it)
		se.foldLate(it, start, a)
		return
	}
	p.addLate(it)
	if a.Bounds != nil && (it.hasValue || it.dist != nil && it.dist.Buckets != nil) {
		if p.deltaCounts == nil {
			p.deltaCounts = s.pool.getCounts(a.buckets())
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
	p := se.pane(start, s)
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

// flush is a flush point at watermark w: late firings of fired windows with late records, first
// firings of windows that end by w, then expired panes and empty series are dropped.
func (s *shard) flush(w int64) {
	oldW := s.applied
	w = max(w, oldW)
	if !s.dirty && w < s.next {
		s.applied = w
		return
	}
	for i := 0; i < len(s.list); {
		se := s.list[i]
		s.flushSeries(se, oldW, w)
		if se.ended(w, &s.g) {
			s.release(se)
			continue // the last series moved into slot i
		}
		i++
	}
	s.dirty = false
	s.applied = w
	s.next = s.g.nextBoundary(w)
}

func (s *shard) flushSeries(se *series, oldW, w int64) {
	g := &s.g
	se.putHead(s)
	if s.dirty {
		s.fireLate(se, oldW)
	}
	// First firings: windows ending in (oldW, w] that hold at least one pane, and the window ends
	// where the series wants a point without one (see series.wantsPoint).
	e := g.paneStart(oldW) + g.slide
	if len(se.panes) > 0 && !se.wantsPoint(e, g, w >= maxTime) {
		e = max(e, se.panes[0].start+g.slide)
	}
	j := 0 // first pane that can be in the window ending at e
	for e <= w {
		for j < len(se.panes) && se.panes[j].start < e-g.size {
			j++
		}
		inWindow := j < len(se.panes) && se.panes[j].start < e
		if !inWindow && !se.wantsPoint(e, g, w >= maxTime) {
			if j == len(se.panes) {
				break
			}
			e = se.panes[j].start + g.slide // jump to the first window that holds a pane
			continue
		}
		s.emit(se, e-g.size, e, false, inWindow)
		e += g.slide
	}
	if s.dirty {
		for i := range se.panes {
			se.panes[i].clearDelta()
		}
	}
	if n := len(se.panes); n > 0 && g.cumulative {
		ac := se.accrualOf() // keeps the newest data's end when its pane is dropped
		ac.lastEnd = max(ac.lastEnd, se.panes[n-1].start+g.slide)
	}
	se.dropPanesBefore(w-g.lateness-g.size+1, g.size, &s.pool)
}

// fireLate emits a late firing for every window that had fired and not expired at oldW and that
// holds a pane with late records. A window of this series whose records all came late never fired
// for it: that firing is its first, with the whole window.
func (s *shard) fireLate(se *series, oldW int64) {
	g := s.g
	lastE := minTime // the last window end emitted, so that no window fires twice
	for i := range se.panes {
		p := &se.panes[i]
		if !p.dirty() {
			continue
		}
		lo := max(p.start+g.slide, oldW-g.lateness+1, lastE+1) // not expired at oldW, not emitted yet
		hi := min(p.start+g.size, oldW)                        // fired at oldW
		// Window ends are multiples of slide: round lo up.
		e := g.paneStart(lo-1) + g.slide
		for ; e <= hi; e += g.slide {
			s.emit(se, e-g.size, e, true, true)
			lastE = e
		}
	}
}

// emit makes the series' Result at window end end: with inWindow, the firing of window [start, end),
// merged from its panes and counted; and its point, if it has one there. Asked for a late firing of a
// window whose records are all late ones, it emits a first firing instead.
func (s *shard) emit(se *series, start, end int64, late, inWindow bool) {
	if !inWindow {
		r := s.pending.next()
		r.Agg, r.Key, r.Overflow, r.Start, r.End = int(se.agg), se.key, se.overflow, start, end
		s.fillPoint(se, r, end, false)
		return
	}
	a := &s.aggs[se.agg]
	s.wTotal, s.wDelta = totals{}, totals{}
	if late && a.Histogram {
		s.wDeltaHst.Reset()
	}
	first, n := se.firstPaneFrom(start), 0
	for i := first; i < len(se.panes) && se.panes[i].start < end; i++ {
		p := &se.panes[i]
		n++
		s.wTotal.merge(&p.total)
		if late && p.dirty() {
			s.wDelta.merge(&p.delta)
			if p.deltaHist != nil {
				s.wDeltaHst.Merge(p.deltaHist)
			}
		}
	}
	if late && s.wDelta.count == s.wTotal.count {
		late = false // nothing of this window had come before: it never fired for this series
	}
	if late {
		s.lateFirings++
	} else {
		s.windowsFired++
	}
	var h *sketch.Histogram // the whole window's values
	if a.keepsSketch() {
		switch {
		case n == 1:
			h = se.panes[first].hist
		case !late && s.g.panesPerWindow > 1 && end > se.accEnd:
			// A window after the running sketch's: bring it forward. (A late window turned first
			// firing lies behind it, and merges its panes below instead of moving the sketch back.)
			h = s.windowSketch(se, end)
		default:
			s.wHist.Reset()
			for i := first; i < first+n; i++ {
				s.wHist.Merge(se.panes[i].hist)
			}
			h = s.wHist
		}
		if s.wTotal.valueCount > 0 {
			lo, hi := s.wTotal.min, s.wTotal.max
			if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
				// A distribution without its min and max: the sketch's own bounds, which its
				// buckets give, keep clamping its quantiles (and a sketch never holds an infinity).
				lo, hi = h.Min(), h.Max()
			}
			h.SetSummary(s.wTotal.sum, lo, hi)
		}
	}
	r := s.pending.next()
	r.Agg, r.Key, r.Overflow, r.Start, r.End, r.late = int(se.agg), se.key, se.overflow, start, end, late
	r.HasWindow = true
	if a.Exemplars > 0 {
		r.MaxExemplar, r.HasMaxExemplar = windowMaxExemplar(se.panes[first : first+n])
	}
	s.fillPoint(se, r, end, late)
	part := &s.wTotal
	if late {
		part = &s.wDelta
	}
	r.Count, r.Sum, r.ValueCount = part.count, part.sum, part.valueCount
	r.WindowValueCount = s.wTotal.valueCount
	if s.wTotal.valueCount > 0 {
		r.Avg = s.wTotal.sum / float64(s.wTotal.valueCount)
		r.Min, r.Max = s.wTotal.min, s.wTotal.max
		for _, q := range a.Quantiles {
			r.Quantiles = append(r.Quantiles, h.Quantile(q))
		}
	}
	if a.Histogram {
		if late {
			r.setHist(s.wDeltaHst)
		} else {
			r.setHist(h)
		}
	}
}

// windowMaxExemplar returns the exemplar with the greatest value of the window made of panes, the
// first of equals.
func windowMaxExemplar(panes []pane) (best exemplar.Exemplar, ok bool) {
	for i := range panes {
		if panes[i].ex == nil {
			continue
		}
		if e, has := panes[i].ex.all.Max(); has && (!ok || e.Value > best.Value) {
			best, ok = e, true
		}
	}
	return best, ok
}

// windowSketch returns the sketch of the series' window ending at end, a first firing of a sliding
// window: acc brought forward pane by pane (the pane that enters merged, the one that leaves
// subtracted), or rebuilt from the panes when it cannot be.
func (s *shard) windowSketch(se *series, end int64) *sketch.Histogram {
	g := s.g
	if se.acc == nil {
		se.acc = newSketch()
	}
	ok := se.accOK && end >= se.accEnd && end-se.accEnd < g.size && se.acc.Scale() == sketch.DefaultScale
	for e := se.accEnd + g.slide; ok && e <= end; e += g.slide {
		if p := se.paneAt(e - g.slide); p != nil {
			se.acc.Merge(p.hist)
		}
		if p := se.paneAt(e - g.slide - g.size); p != nil && !se.acc.Subtract(p.hist) {
			ok = false
		}
	}
	if !ok {
		se.acc.Reset()
		for i := se.firstPaneFrom(end - g.size); i < len(se.panes) && se.panes[i].start < end; i++ {
			se.acc.Merge(se.panes[i].hist)
		}
	}
	se.accEnd, se.accOK = end, true
	return se.acc
}

// drain fires every open window of the series of the aggregations marked in aggs, as it stands (late
// firings of fired windows with late records, first firings of the others), and drops those series,
// without moving the shard's watermark.
func (s *shard) drain(aggs []bool) {
	for i := 0; i < len(s.list); {
		se := s.list[i]
		if !aggs[se.agg] {
			i++
			continue
		}
		s.flushSeries(se, s.applied, maxTime)
		s.release(se) // flushSeries at maxTime dropped every pane; the last series moved into slot i
	}
}
