package stream

import (
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
)

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
	// accs are the aggregation's accumulators of every record of the pane (see Accumulator); nil
	// without. Behind a pointer: a pane without them, the usual one, is a word longer only.
	accs *accumulators
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

// panePool recycles the sketches, bucket counts and exemplar reservoirs of dropped panes within a
// shard.
type panePool struct {
	sketches  sketchFree
	counts    countsFree
	exemplars exemplarsFree
	accs      accumulatorsFree
}

// paneMaker is what a series needs to make and fill its panes: the windowing, the aggregations, and
// the pool of sketches and buffers of the shard that holds the series.
type paneMaker struct {
	g    windowing
	aggs []Aggregation
	pool panePool
}

// newPane returns an empty pane at start with the sketches, counts and accumulators that aggregation
// agg keeps, under the output mode of g.
func newPane(start int64, agg int32, a *Aggregation, g *windowing, sp *panePool) pane {
	p := pane{start: start, accs: sp.accs.get(agg, a.Accumulators)}
	if a.KeepsSketch() {
		p.hist = sp.sketches.get()
	}
	if a.Histogram && !g.fold {
		p.deltaHist = sp.sketches.get()
	}
	if a.Bounds != nil {
		p.counts = sp.counts.get(a.buckets())
	}
	if a.Exemplars > 0 {
		p.ex = sp.exemplars.get(a.Exemplars)
	}
	return p
}

// release gives the pane's sketches, counts and accumulators back to the pool; agg is its
// aggregation.
func (p *pane) release(agg int32, sp *panePool) {
	sp.accs.put(agg, p.accs)
	p.accs = nil
	sp.sketches.put(p.hist)
	sp.sketches.put(p.deltaHist)
	sp.counts.put(p.counts)
	sp.counts.put(p.deltaCounts)
	sp.exemplars.put(p.ex)
	p.hist, p.deltaHist, p.counts, p.deltaCounts, p.ex = nil, nil, nil, nil, nil
}
