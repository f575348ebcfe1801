package stream

import (
	"cmp"
	"slices"
)

// WindowView is a window of an aggregation that holds records and has not expired: it fires once W
// reaches End (Fired: it has), and takes late records until W reaches End plus allowed_lateness.
type WindowView struct {
	Start, End int64
	Fired      bool
}

// OpenWindows returns, at the watermark, at most limit of aggregation agg's windows that hold
// records and have not expired, earliest first, and how many there are. It reads the panes of the
// aggregation's series one shard at a time, under that shard's lock, taking only their starts.
func (e *Engine) OpenWindows(agg, limit int) (views []WindowView, total int) {
	if agg < 0 || agg >= len(e.aggs) {
		return nil, 0
	}
	w, g := e.Watermark(), e.g
	starts := map[int64]struct{}{}
	for _, sh := range e.allShards() {
		sh.mu.Lock()
		for _, se := range sh.list {
			if int(se.agg) != agg {
				continue
			}
			for i := range se.panes {
				starts[se.panes[i].start] = struct{}{}
			}
		}
		sh.mu.Unlock()
	}
	ends := map[int64]struct{}{}
	for p := range starts {
		// The windows that hold the pane starting at p: those starting in (p - size, p].
		for start := g.paneStart(p); start > p-g.size; start -= g.slide {
			if end := start + g.size; !g.expired(end, w) {
				ends[end] = struct{}{}
			}
		}
	}
	for end := range ends {
		views = append(views, WindowView{Start: end - g.size, End: end, Fired: w >= end})
	}
	slices.SortFunc(views, func(a, b WindowView) int { return cmp.Compare(a.End, b.End) })
	total = len(views)
	return views[:min(total, max(limit, 0))], total
}

// SeriesCount is a series of an aggregation, by its key, and its records (weighted) in a window.
type SeriesCount struct {
	Key     string
	Records uint64
}

// TopSeries returns at most n of aggregation agg's series with the most records in the last window
// that W has closed, most first (ties by key), and that window's end (0 with none). It reads the
// aggregation's series one shard at a time, under that shard's lock, taking only their counts.
func (e *Engine) TopSeries(agg, n int) (top []SeriesCount, end int64) {
	if agg < 0 || agg >= len(e.aggs) || n <= 0 {
		return nil, 0
	}
	w, g := e.Watermark(), e.g
	if w <= minTime+g.size {
		return nil, 0
	}
	end = g.paneStart(w-g.size) + g.size
	start := end - g.size
	for _, sh := range e.allShards() {
		sh.mu.Lock()
		for _, se := range sh.list {
			if int(se.agg) != agg {
				continue
			}
			var records uint64
			for i := range se.panes {
				p := &se.panes[i]
				if p.start < start || p.start >= end {
					continue
				}
				if se.head.count > 0 && se.headStart == p.start {
					records += se.head.count // the head holds the pane's totals meanwhile
				} else {
					records += p.total.count
				}
			}
			if records > 0 {
				top = append(top, SeriesCount{Key: se.key, Records: records})
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(top, func(a, b SeriesCount) int {
		if c := cmp.Compare(b.Records, a.Records); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return top[:min(len(top), n)], end
}
