package stream

// The firing side of a shard: brought to a watermark (observe, flush), it fires its series' windows
// and late firings (emit), fills their points (fillPoint), and at the end fires what is left (drain).

import (
	"math"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

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
	if a.KeepsSketch() {
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
	}
	r := s.pending.next()
	r.Agg, r.Key, r.Overflow, r.Start, r.End, r.late = int(se.agg), se.key, se.overflow, start, end, late
	r.HasWindow = true
	part := &s.wTotal
	if late {
		part = &s.wDelta
	}
	s.fillWindow(se, r, se.panes[first:first+n], h, &s.wTotal, part)
	if a.Histogram {
		if late {
			r.setHist(s.wDeltaHst)
		} else {
			r.setHist(h)
		}
	}
	s.fillPoint(se, r, end, late)
}

// fillWindow sets r's figures of the window made of panes, whose records are whole and whose values'
// sketch is h (nil unless the aggregation keeps one): the gauges of the whole window, and the counts
// and sum of part, the records r reports (a late firing's, or whole).
func (s *shard) fillWindow(se *series, r *Result, panes []pane, h *sketch.Histogram, whole, part *totals) {
	a := &s.aggs[se.agg]
	if h != nil && whole.valueCount > 0 {
		lo, hi := whole.min, whole.max
		if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
			// A distribution without its min and max: the sketch's own bounds, which its buckets
			// give, keep clamping its quantiles (and a sketch never holds an infinity).
			lo, hi = h.Min(), h.Max()
		}
		h.SetSummary(whole.sum, lo, hi)
	}
	if a.Exemplars > 0 {
		r.MaxExemplar, r.HasMaxExemplar = windowMaxExemplar(panes)
	}
	if len(a.Accumulators) > 0 {
		r.Values = s.windowValues(se.agg, panes, r.Values)
	}
	r.Count, r.Sum, r.ValueCount = part.count, part.sum, part.valueCount
	r.WindowValueCount, r.WindowCount, r.WindowSum = whole.valueCount, whole.count, whole.sum
	if whole.valueCount > 0 {
		r.Avg = whole.sum / float64(whole.valueCount)
		r.Min, r.Max = whole.min, whole.max
		for _, q := range a.Quantiles {
			r.Quantiles = append(r.Quantiles, h.Quantile(q))
		}
	}
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
	if sent := se.ac.sentOf(e - g.slide); sent != nil && !late {
		// The window's final result after early ones: its records since the last (delta), or as
		// it would be without them (cumulative).
		if !g.cumulative {
			t, pt.Start = t.minus(&sent.total), sent.at
			sent.subtractFrom(pt)
		}
		sent.start = minTime // none; its storage kept
		if !g.cumulative && t.count == 0 && !se.ac.folded() {
			r.HasPoint, r.Point = false, Point{} // the early results carried every record
			return
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

// emitEarly makes the early result of series se's open window, its pane i, at watermark w, if W has
// reached another early result time in it since the last (see Config.EarlyResults) and the series
// has records since its previous result: the gauges of the window so far, stamped with that time,
// and its point (cumulative: the running totals with the window so far; delta: what the window took
// since its previous result, from that result's time). Early points carry no exemplars; the window's
// final point carries its exemplars as without early results.
func (s *shard) emitEarly(se *series, i int, w int64) {
	g, a := &s.g, &s.aggs[se.agg]
	p := &se.panes[i]
	b := g.earlyAt(w) // before the window's end: p holds w
	sent := se.ac.sentOf(p.start)
	from, before := p.start, uint64(0) // the previous result's time and the records it had
	if sent != nil {
		from, before = sent.at, sent.total.count
	}
	if b <= from || p.total.count == before {
		return
	}
	r := s.pending.next()
	r.Agg, r.Key, r.Overflow, r.Start, r.End, r.Early, r.HasWindow = int(se.agg), se.key, se.overflow, p.start, b, true, true
	s.fillWindow(se, r, se.panes[i:i+1], p.hist, &p.total, &p.total)
	if a.Histogram {
		r.setHist(p.hist)
	}
	pt := &r.Point
	r.HasPoint, pt.Start = true, from
	t := p.total
	var ac *accrual
	if g.cumulative {
		ac = se.ac
		pt.Start = p.start // the series' first point's start: its first window's
		if ac != nil && ac.started {
			pt.Start = ac.start
		}
		if ac != nil {
			t.merge(&ac.cum)
			t.merge(&ac.fold)
		}
	}
	if a.Histogram {
		h := r.pointSketch()
		h.Merge(p.hist)
		if ac != nil && ac.cumHist != nil {
			h.Merge(ac.cumHist)
		}
		if ac != nil && ac.foldHist != nil {
			h.Merge(ac.foldHist)
		}
		pt.Hist = h
	}
	if a.Bounds != nil {
		pt.BucketCounts = r.pointCounts(a.buckets())
		addCounts(pt.BucketCounts, p.counts)
		if ac != nil && ac.cumCounts != nil {
			addCounts(pt.BucketCounts, ac.cumCounts)
		}
		if ac != nil && ac.foldCounts != nil {
			addCounts(pt.BucketCounts, ac.foldCounts)
		}
	}
	if !g.cumulative && sent != nil {
		t = t.minus(&sent.total)
		sent.subtractFrom(pt)
	}
	pt.Count, pt.ValueCount, pt.Sum, pt.Min, pt.Max = t.count, t.valueCount, t.sum, t.min, t.max
	ac = se.accrualOf()
	if ac.early == nil {
		ac.early = &earlySent{}
	}
	ac.early.take(p, b, a.Histogram)
}

// take records that the pane's records as they stand went out in an early result at time at: its
// totals, its bucket counts, and with hist (the aggregation reports a histogram, whose delta points
// subtract it) its sketch.
func (es *earlySent) take(p *pane, at int64, hist bool) {
	es.start, es.at, es.total = p.start, at, p.total
	if hist {
		if es.hist == nil {
			es.hist = newSketch()
		}
		es.hist.CopyFrom(p.hist)
	}
	if p.counts != nil {
		es.counts = append(es.counts[:0], p.counts...)
	}
}

// subtractFrom takes what was sent out of point pt's histogram and bucket counts: what the window
// took since.
func (es *earlySent) subtractFrom(pt *Point) {
	if pt.Hist != nil && es.hist != nil {
		pt.Hist.Subtract(es.hist) // exact: es.hist is an earlier state of the same sketch
	}
	for i := range pt.BucketCounts {
		if i < len(es.counts) {
			pt.BucketCounts[i] -= es.counts[i]
		}
	}
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
	se.putHead(&s.paneMaker)
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
	if g.early > 0 && w < maxTime {
		if i := se.firstPaneFrom(g.paneStart(w)); i < len(se.panes) && se.panes[i].start == g.paneStart(w) {
			s.emitEarly(se, i, w) // the open window's
		}
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

// windowValues appends to dst the figures of the accumulators of the window made of panes, each
// merged from theirs.
func (s *shard) windowValues(agg int32, panes []pane, dst []float64) []float64 {
	if len(panes) == 1 {
		for _, acc := range *panes[0].accs {
			dst = append(dst, acc.Value())
		}
		return dst
	}
	w := s.windowAccumulators(agg)
	for i, acc := range w {
		acc.Reset()
		for j := range panes {
			acc.Merge((*panes[j].accs)[i])
		}
		dst = append(dst, acc.Value())
	}
	return dst
}

// windowAccumulators returns the shard's scratch accumulators of aggregation agg, for merging a
// window's panes.
func (s *shard) windowAccumulators(agg int32) accumulators {
	if s.wAccs == nil {
		s.wAccs = make([]*accumulators, len(s.aggs))
	}
	if s.wAccs[agg] == nil {
		s.wAccs[agg] = newAccumulators(s.aggs[agg].Accumulators)
	}
	return *s.wAccs[agg]
}
