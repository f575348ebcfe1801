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
