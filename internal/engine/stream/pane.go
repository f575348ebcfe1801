package stream

import (
	"math"
	"slices"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

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
}

func (t *totals) addItem(it *item) {
	if it.dist != nil {
		t.addDist(it.dist)
		return
	}
	t.add(it.v, it.hasValue, it.n)
}

// insertItem inserts the item's values into sketch h (nil: none), with their count.
func insertItem(h *sketch.Histogram, it *item) {
	switch {
	case h == nil:
	case it.dist != nil:
		if !it.dist.NoValues {
			h.Merge(it.dist.Sketch)
		}
	case it.hasValue:
		h.InsertN(it.v, it.n)
	}
}

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

// pane holds one series' records of one slide, [start, start+slide). A series keeps its panes by
// value, contiguous, so that merging a window's panes reads memory in order.
type pane struct {
	start int64
	// ex holds the exemplars of the pane's records and of delta's, with Aggregation.Exemplars (nil
	// without); beside start, which finding the pane reads, so that offering one reads a line less.
	ex    *paneExemplars
	total totals
	hist  *sketch.Histogram // its values; nil unless the aggregation keeps a sketch
	// delta holds the records added since the shard's last flush point that were late for a window
	// containing this pane (LateUpdate). Between flush points the fired windows do not change, so one
	// delta serves every window that will fire late for it.
	delta     totals
	deltaHist *sketch.Histogram // values of delta; nil unless the aggregation reports a histogram and late firings revise
	// counts are the pane's on-time values in the aggregation's explicit buckets (nil without), for
	// its slide's point; deltaCounts those of delta, made when a late firing first needs them.
	counts, deltaCounts []uint64
}

// paneExemplars are one pane's exemplars: of all its records, for its slide's point and the max of
// the windows it is in, and of its delta, for a late firing's point.
type paneExemplars struct {
	all, delta exemplar.Reservoir
}

func newPaneExemplars(size int) *paneExemplars {
	pe := &paneExemplars{}
	pe.all.Init(size)
	pe.delta.Init(size)
	return pe
}

func (p *pane) dirty() bool { return p.delta.count > 0 }

// addLate puts a record that is late for a fired window of this pane into its totals and its delta,
// and its values into the delta's sketch; the caller inserts them into the pane's own sketch (see
// shard.add). On-time records go to the series' head, not here.
func (p *pane) addLate(it *item) {
	p.total.addItem(it)
	p.delta.addItem(it)
	insertItem(p.deltaHist, it)
}

func (p *pane) clearDelta() {
	if p.delta.count == 0 {
		return
	}
	p.delta = totals{}
	if p.deltaHist != nil {
		p.deltaHist.Reset()
	}
	clear(p.deltaCounts)
	if p.ex != nil {
		p.ex.delta.Reset()
	}
}

// newSketch is the one place that picks the sketch's parameters.
func newSketch() *sketch.Histogram { return sketch.New(sketch.DefaultScale, sketch.DefaultMaxBuckets) }

// sketchPool recycles the sketches, bucket counts and exemplar reservoirs of dropped panes within a
// shard.
type sketchPool struct {
	free       []*sketch.Histogram
	freeCounts [][]uint64
	freeEx     []*paneExemplars
}

// getExemplars returns empty reservoirs of size exemplars.
func (sp *sketchPool) getExemplars(size int) *paneExemplars {
	k := len(sp.freeEx)
	if k == 0 {
		return newPaneExemplars(size)
	}
	pe := sp.freeEx[k-1]
	sp.freeEx[k-1] = nil
	sp.freeEx = sp.freeEx[:k-1]
	pe.all.Init(size)
	pe.delta.Init(size)
	return pe
}

func (sp *sketchPool) putExemplars(pe *paneExemplars) {
	if pe != nil {
		sp.freeEx = append(sp.freeEx, pe)
	}
}

// getCounts returns n zero bucket counts.
func (sp *sketchPool) getCounts(n int) []uint64 {
	k := len(sp.freeCounts)
	if k == 0 {
		return make([]uint64, n)
	}
	c := sp.freeCounts[k-1]
	sp.freeCounts[k-1] = nil
	sp.freeCounts = sp.freeCounts[:k-1]
	clear(c)
	return c
}

func (sp *sketchPool) putCounts(c []uint64) {
	if c != nil {
		sp.freeCounts = append(sp.freeCounts, c)
	}
}

func (sp *sketchPool) get() *sketch.Histogram {
	n := len(sp.free)
	if n == 0 {
		return newSketch()
	}
	h := sp.free[n-1]
	sp.free[n-1] = nil
	sp.free = sp.free[:n-1]
	h.Reset()
	return h
}

func (sp *sketchPool) put(h *sketch.Histogram) {
	if h != nil {
		sp.free = append(sp.free, h)
	}
}

// paneMaker is what a series needs to make and fill its panes: the windowing, the aggregations, and
// the pool of sketches and buffers of the shard that holds the series.
type paneMaker struct {
	g    windowing
	aggs []Aggregation
	pool sketchPool
}

// newPane returns an empty pane at start with the sketches and counts that aggregation a keeps, under
// the output mode of g.
func newPane(start int64, a *Aggregation, g *windowing, sp *sketchPool) pane {
	p := pane{start: start}
	if a.keepsSketch() {
		p.hist = sp.get()
	}
	if a.Histogram && !g.fold {
		p.deltaHist = sp.get()
	}
	if a.Bounds != nil {
		p.counts = sp.getCounts(a.buckets())
	}
	if a.Exemplars > 0 {
		p.ex = sp.getExemplars(a.Exemplars)
	}
	return p
}

// release gives the pane's sketches and counts back to the pool.
func (p *pane) release(sp *sketchPool) {
	sp.put(p.hist)
	sp.put(p.deltaHist)
	sp.putCounts(p.counts)
	sp.putCounts(p.deltaCounts)
	sp.putExemplars(p.ex)
	p.hist, p.deltaHist, p.counts, p.deltaCounts, p.ex = nil, nil, nil, nil, nil
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
