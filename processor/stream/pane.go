package stream

import (
	"math"

	"github.com/windowaggregator/windowaggregator/processor/sketch"
)

// stats are the scalar aggregates of a set of records.
type stats struct {
	count      uint64  // records
	valueCount uint64  // records with a finite value
	sum        float64 // of the values
	min, max   float64 // of the values; meaningful when valueCount > 0
}

func (s *stats) add(v float64, hasValue bool) {
	s.count++
	if !hasValue {
		return
	}
	if s.valueCount == 0 {
		s.min, s.max = v, v
	} else {
		s.min = math.Min(s.min, v)
		s.max = math.Max(s.max, v)
	}
	s.valueCount++
	s.sum += v
}

func (s *stats) merge(o *stats) {
	s.count += o.count
	if o.valueCount == 0 {
		return
	}
	if s.valueCount == 0 {
		s.min, s.max = o.min, o.max
	} else {
		s.min = math.Min(s.min, o.min)
		s.max = math.Max(s.max, o.max)
	}
	s.valueCount += o.valueCount
	s.sum += o.sum
}

// pane holds one series' records of one slide, [start, start+slide).
type pane struct {
	start int64
	total stats
	// delta holds the records added since the shard's last flush point that were late for a window
	// containing this pane (LateUpdate). Between flush points the fired windows do not change, so one
	// delta serves every window that will fire late for it.
	delta     stats
	hist      *sketch.Histogram // all values; nil unless the aggregation keeps a sketch
	deltaHist *sketch.Histogram // values of delta; nil unless the aggregation reports a histogram
}

func (p *pane) dirty() bool { return p.delta.count > 0 }

// add puts a record into the pane; late says it is late for a fired window of this pane.
func (p *pane) add(v float64, hasValue, late bool) {
	p.total.add(v, hasValue)
	if hasValue && p.hist != nil {
		p.hist.Insert(v)
	}
	if late {
		p.delta.add(v, hasValue)
		if hasValue && p.deltaHist != nil {
			p.deltaHist.Insert(v)
		}
	}
}

func (p *pane) clearDelta() {
	if p.delta.count == 0 {
		return
	}
	p.delta = stats{}
	if p.deltaHist != nil {
		p.deltaHist.Reset()
	}
}

// newSketch is the one place that picks the sketch's parameters.
func newSketch() *sketch.Histogram { return sketch.New(sketch.DefaultScale, sketch.DefaultMaxBuckets) }

// panePool recycles panes, and their sketches, within a shard.
type panePool struct {
	free []*pane
}

func (pp *panePool) get(start int64, a *Aggregation) *pane {
	var p *pane
	if n := len(pp.free); n > 0 {
		p = pp.free[n-1]
		pp.free[n-1] = nil
		pp.free = pp.free[:n-1]
	} else {
		p = &pane{}
	}
	p.start = start
	p.total, p.delta = stats{}, stats{}
	if a.keepsSketch() {
		if p.hist == nil {
			p.hist = newSketch()
		} else {
			p.hist.Reset()
		}
	} else {
		p.hist = nil
	}
	if a.Histogram {
		if p.deltaHist == nil {
			p.deltaHist = newSketch()
		} else {
			p.deltaHist.Reset()
		}
	} else {
		p.deltaHist = nil
	}
	return p
}

func (pp *panePool) put(p *pane) { pp.free = append(pp.free, p) }
