package stream

import (
	"math"
	"unsafe"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

// series is one distinct key of one aggregation, with its live panes.
//
// Adding a record reads and writes the series alone, on three cache lines: the first two, which
// finding it compares and which hold its head, and the one of its next pending value. Its size is a
// whole number of cache lines, of a size class that starts every series on a cache line, so that its
// fields lie on the same lines in every series.
type series struct {
	// The fields that finding a series compares come first, with a short key in the series itself
	// (see setKey), so that finding one reads one or two cache lines, not the series and then its key.
	key      string
	hash     uint64 // of agg and key, as Engine.hash
	agg      int32
	npending int32 // values in pending
	keyBuf   [inlineKeyLen]byte

	// head is the totals of the pane starting at headStart, with every record added since it was
	// taken from the pane, and headHist the pane's sketch; head.count == 0: no head. The pane's own
	// totals are stale meanwhile, and the values in pending are not in headHist yet: see shard.add.
	// Records mostly go to a series' newest pane, so they add to the head and leave the pane alone.
	headStart int64
	head      totals
	// headHist is the pane's sketch, kept here so that inserting the gathered values, every
	// pendingValues records, does not have to find the pane again.
	headHist *sketch.Histogram

	overflow bool
	accOK    bool     // see acc
	pos      int32    // index in its shard's list
	ac       *accrual // nil until the series needs one
	panes    []pane   // sorted by start
	pending  [pendingValues]float64

	// For sliding windows with a sketch: acc holds the values of the panes in [accEnd-size, accEnd)
	// but the pending ones, kept up to date as they are inserted and panes leave, so that the next
	// window's sketch is acc plus the pane that enters minus the pane that leaves rather than a merge
	// of every pane.
	acc    *sketch.Histogram
	accEnd int64
}

// pendingValues is how many values a series gathers before it inserts them into its head's sketch.
// In a collector the engine's state is cold when a batch comes, and a sketch insert reads two or
// three cache lines of the sketch and one or two of its counters; gathered, the values of many
// records of a series pay for those lines once.
const pendingValues = 32 // a power of two: Batch.prefetch masks with it

// inlineKeyLen is the longest key a series holds in itself. Three short strings, such as service,
// span name and method, take about 45 bytes. The series grows by 48 bytes, what a key of 33 to 48
// bytes takes in an allocation of its own; a longer key, which still has one, leaves them unused.
const inlineKeyLen = 48

// setKey sets the series' key: in keyBuf when it fits, which is then never written again, or in a
// string of its own. The series must not be copied after that.
func (s *series) setKey(key []byte) {
	if len(key) == 0 || len(key) > len(s.keyBuf) {
		s.key = string(key)
		return
	}
	n := copy(s.keyBuf[:], key)
	s.key = unsafe.String(&s.keyBuf[0], n)
}

// pane returns the series' pane starting at start, creating it if needed. The pointer is valid until
// the series' panes change.
func (s *series) pane(start int64, pm *paneMaker) *pane {
	n := len(s.panes)
	// Records mostly go to the newest pane: look there first.
	if n > 0 && s.panes[n-1].start == start {
		return &s.panes[n-1]
	}
	i := n
	if n > 0 && s.panes[n-1].start > start {
		i = s.firstPaneFrom(start)
		if s.panes[i].start == start {
			return &s.panes[i]
		}
	}
	s.panes = append(s.panes, pane{})
	copy(s.panes[i+1:], s.panes[i:])
	s.panes[i] = newPane(start, s.agg, &pm.aggs[s.agg], &pm.g, &pm.pool)
	return &s.panes[i]
}

// paneAt returns the pane starting at start, or nil.
func (s *series) paneAt(start int64) *pane {
	if i := s.firstPaneFrom(start); i < len(s.panes) && s.panes[i].start == start {
		return &s.panes[i]
	}
	return nil
}

// takeHead makes the pane starting at start, created if needed, the series' head.
func (s *series) takeHead(start int64, pm *paneMaker) {
	s.putHead(pm)
	p := s.pane(start, pm)
	s.head, s.headStart, s.headHist = p.total, start, p.hist
}

// putHead writes the series' head back into its pane, with the pending values, and leaves the series
// without a head.
//
// Every reader of the head's pane or of acc must put the head back first: the shard does at every
// flush point (flushSeries) and for a snapshot. Between two flush points nothing reads them, and
// acc's range moves only at a flush point, so a value goes into acc exactly when its pane is in acc's
// range when it is inserted, as it would have had it been inserted at once. The head's totals are
// the pane's with the records added in order, so they are what adding them to the pane would have
// made, to the last bit of the sum.
func (s *series) putHead(pm *paneMaker) {
	if s.head.count == 0 {
		return
	}
	s.insertPending(pm)
	s.paneAt(s.headStart).total = s.head
	s.head, s.headHist = totals{}, nil
}

// paneTotals are the totals of the series' i-th pane as they stand, without putting the head back:
// the head's while it holds that pane's (a reader that only copies figures, such as the operator's
// view, leaves the series as it is).
func (s *series) paneTotals(i int) totals {
	if s.head.count > 0 && s.headStart == s.panes[i].start {
		return s.head
	}
	return s.panes[i].total
}

// addToHead adds a record of weight n to the series' head; hasValue says v is finite.
//
// The value of a record of weight 1 goes to pending even when the aggregation keeps no sketch, where
// insertValues drops it: checking headHist here would read another cache line of the series for
// every record. A weighted value is inserted at once, with its count.
func (s *series) addToHead(v float64, hasValue bool, n uint64, pm *paneMaker) {
	s.head.add(v, hasValue, n)
	if !hasValue {
		return
	}
	if n != 1 {
		s.insertItem(s.headHist, s.paneAt(s.headStart).counts, s.headStart, &item{v: v, n: n, hasValue: true}, pm)
		return
	}
	s.pending[s.npending&(pendingValues-1)] = v
	s.npending++
	if s.npending == pendingValues {
		s.insertPending(pm)
	}
}

// insertPending inserts the pending values into the head's sketch, and into acc if the head's pane
// is in acc's range, and counts them in the pane's explicit buckets.
func (s *series) insertPending(pm *paneMaker) {
	vs := s.pending[:s.npending]
	s.npending = 0
	s.insertValues(s.headHist, s.headStart, vs, pm.g.size)
	if bounds := pm.aggs[s.agg].Bounds; bounds != nil && len(vs) > 0 {
		counts := s.paneAt(s.headStart).counts
		for _, v := range vs {
			if i := bucketOf(bounds, v); counts[i] != math.MaxUint64 { // saturated (see sketch.AddCounts)
				counts[i]++
			}
		}
	}
}

// insertValues inserts values of the pane starting at start into h, its sketch, and into acc if the
// pane is in acc's range. Without a sketch (h nil) it does nothing.
func (s *series) insertValues(h *sketch.Histogram, start int64, vs []float64, size int64) {
	if h == nil {
		return
	}
	for _, v := range vs {
		h.Insert(v)
	}
	if s.inAcc(start, size) {
		for _, v := range vs {
			s.acc.Insert(v)
		}
	}
}

// insertItem inserts the values of item it, of the pane starting at start, into h (the pane's sketch,
// or nil) and into acc if the pane is in acc's range, and counts them in counts (the pane's explicit
// buckets, or nil).
func (s *series) insertItem(h *sketch.Histogram, counts []uint64, start int64, it *item, pm *paneMaker) {
	if h != nil {
		insertItem(h, it)
		if s.inAcc(start, pm.g.size) {
			insertItem(s.acc, it)
		}
	}
	countItem(counts, pm.aggs[s.agg].Bounds, it)
}

// addDistToHead adds a distribution to the series' head, its sketch merged at once.
func (s *series) addDistToHead(d *Distribution, pm *paneMaker) {
	s.head.addDist(d)
	s.insertItem(s.headHist, s.paneAt(s.headStart).counts, s.headStart, &item{dist: d}, pm)
}

// inAcc reports whether a pane starting at p is one whose values acc holds.
func (s *series) inAcc(p, size int64) bool { return s.accOK && p >= s.accEnd-size && p < s.accEnd }

// firstPaneFrom returns the index of the first pane starting at or after t.
func (s *series) firstPaneFrom(t int64) int {
	lo, hi := 0, len(s.panes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.panes[m].start < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// dropPanesBefore returns to the pool every pane starting before t, taking their values out of acc.
// The head must have been put back (flushSeries does so first).
func (s *series) dropPanesBefore(t, size int64, sp *panePool) {
	i := 0
	for i < len(s.panes) && s.panes[i].start < t {
		p := &s.panes[i]
		if s.inAcc(p.start, size) && p.hist != nil && !s.acc.Subtract(p.hist) {
			s.accOK = false
		}
		p.release(s.agg, sp)
		i++
	}
	if i == 0 {
		return
	}
	n := copy(s.panes, s.panes[i:])
	clear(s.panes[n:])
	s.panes = s.panes[:n]
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

// foldExemplar adds a late record's exemplar to what the series' next point carries, in a reservoir
// of k.
func (s *series) foldExemplar(ex *exemplar.Exemplar, k int) {
	ac := s.accrualOf()
	if ac.foldEx == nil {
		ac.foldEx = exemplar.New(k)
	}
	ac.foldEx.Offer(*ex)
}
