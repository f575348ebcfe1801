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

// OpenWindows returns, at the watermark, at most limit of the windows that hold records of some
// aggregation and have not expired (every aggregation has the same windows), earliest first, how
// many there are, and how many hold records of each aggregation, by index. It reads the panes of
// every series one shard at a time, under that shard's lock, taking only their starts.
func (e *Engine) OpenWindows(limit int) (views []WindowView, total int, byAgg []int) {
	w, g := e.Watermark(), e.g
	starts := make([]map[int64]struct{}, len(e.aggs))
	for i := range starts {
		starts[i] = map[int64]struct{}{}
	}
	for _, sh := range e.allShards() {
		sh.mu.Lock()
		for _, se := range sh.list {
			for i := range se.panes {
				starts[se.agg][se.panes[i].start] = struct{}{}
			}
		}
		sh.mu.Unlock()
	}
	ends, byAgg := map[int64]struct{}{}, make([]int, len(e.aggs))
	for agg, aggStarts := range starts {
		aggEnds := map[int64]struct{}{}
		for p := range aggStarts {
			g.liveWindowEnds(p, w, func(end int64) { aggEnds[end], ends[end] = struct{}{}, struct{}{} })
		}
		byAgg[agg] = len(aggEnds)
	}
	for end := range ends {
		views = append(views, WindowView{Start: end - g.size, End: end, Fired: w >= end})
	}
	slices.SortFunc(views, func(a, b WindowView) int { return cmp.Compare(a.End, b.End) })
	total = len(views)
	return views[:min(total, max(limit, 0))], total, byAgg
}

// SeriesCount is a series of an aggregation, by its key, and its records (weighted) in a window.
// Overflow marks the aggregation's overflow series (whose key is empty).
type SeriesCount struct {
	Key      string
	Records  uint64
	Overflow bool
}

// TopSeries returns at most n of aggregation agg's series with the most records in the last window
// that W has closed, most first (ties by key), and that window's end (0 with none). Once that window
// has expired too (without allowed_lateness, at once), its panes are gone: it is the next window to
// fire, with the records it has so far. It reads the aggregation's series one shard at a time, under
// that shard's lock, taking only their counts.
func (e *Engine) TopSeries(agg, n int) (top []SeriesCount, end int64) {
	if agg < 0 || agg >= len(e.aggs) || n <= 0 {
		return nil, 0
	}
	w, g := e.Watermark(), e.g
	if w <= minTime+g.size {
		return nil, 0
	}
	end = g.paneStart(w-g.size) + g.size
	if g.expired(end, w) {
		end += g.slide
	}
	start := end - g.size
	for _, sh := range e.allShards() {
		sh.mu.Lock()
		for _, se := range sh.list {
			if int(se.agg) != agg {
				continue
			}
			var records uint64
			for i := range se.panes {
				if p := se.panes[i].start; p >= start && p < end {
					records += se.paneTotals(i).count
				}
			}
			if records > 0 {
				top = append(top, SeriesCount{Key: se.key, Records: records, Overflow: se.overflow})
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

// SeriesWindow is a window of one series that holds records and has not expired, with the records
// (weighted) and the sum of their values that it holds so far.
type SeriesWindow struct {
	WindowView
	Records uint64
	Sum     float64
}

// FindSeries returns the key of aggregation agg's first series whose key match accepts, its windows
// earliest first, and whether there is one. Under each shard's lock it only copies the keys of the
// aggregation's series (match runs outside it), then, for the one matched, its panes' totals.
func (e *Engine) FindSeries(agg int, match func(key string) bool) (key string, windows []SeriesWindow, found bool) {
	if agg < 0 || agg >= len(e.aggs) {
		return "", nil, false
	}
	w, g := e.Watermark(), e.g
	type paneTotals struct {
		start int64
		totals
	}
	var panes []paneTotals
	var keys []string
	for _, sh := range e.shards {
		keys = keys[:0]
		sh.mu.Lock()
		for _, se := range sh.list {
			if int(se.agg) == agg && !se.overflow {
				keys = append(keys, se.key)
			}
		}
		sh.mu.Unlock()
		i := slices.IndexFunc(keys, match)
		if i < 0 {
			continue
		}
		key = keys[i]
		sh.mu.Lock()
		for _, se := range sh.list {
			if int(se.agg) != agg || se.overflow || se.key != key {
				continue
			}
			found = true
			for i := range se.panes {
				panes = append(panes, paneTotals{se.panes[i].start, se.paneTotals(i)})
			}
			break
		}
		sh.mu.Unlock()
		if found { // else it ended between the two looks: look on
			break
		}
	}
	if !found {
		return "", nil, false
	}
	byEnd := map[int64]*SeriesWindow{}
	for _, p := range panes {
		g.liveWindowEnds(p.start, w, func(end int64) {
			sw := byEnd[end]
			if sw == nil {
				sw = &SeriesWindow{WindowView: WindowView{Start: end - g.size, End: end, Fired: w >= end}}
				byEnd[end] = sw
			}
			sw.Records += p.count
			sw.Sum += p.sum
		})
	}
	for _, sw := range byEnd {
		windows = append(windows, *sw)
	}
	slices.SortFunc(windows, func(a, b SeriesWindow) int { return cmp.Compare(a.End, b.End) })
	return key, windows, true
}

// Overflowing reports whether aggregation agg holds max_series series and its overflow series holds
// records: a new series' records go there.
func (e *Engine) Overflowing(agg int) bool {
	if agg < 0 || agg >= len(e.aggs) {
		return false
	}
	e.overflow.mu.Lock()
	defer e.overflow.mu.Unlock()
	return e.overflow.overflow[agg] != nil
}
