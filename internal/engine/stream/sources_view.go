package stream

import (
	"cmp"
	"slices"
)

// SourceView is one source of a watermark with per-source tracking, as an operator reads it.
type SourceView struct {
	// Key is the source's key, as SetSource was given it; empty for the shared source, which holds
	// the sources past max_sources.
	Key    []byte
	Shared bool
	// Watermark is the source's own: its greatest accepted event time, clamped to the wall clock,
	// less max_out_of_orderness; HasWatermark is false while none of its records was accepted.
	Watermark    int64
	HasWatermark bool
	// LastHeard is the wall time of its last batch with an accepted record, or of its first.
	LastHeard int64
	// Idle: not heard from within source_idle_timeout; it holds W back no longer.
	Idle bool
	// HoldsBack: the source whose time W follows (the least of the sources' own watermarks), when
	// it alone is that far behind: no other source not idle is within the tie of Sources of it.
	HoldsBack bool
	// AtW: one of the sources within the tie of the least, when several are: they hold W together,
	// and none is marked as holding it back.
	AtW bool
}

// Sources returns, at the clock's now, at most limit of the watermark's sources (none without
// per-source tracking): the one that holds W back first, then the others by their own watermark,
// least first, the idle ones last. Sources not idle whose greatest event times are within tie ns of
// the least are tied: with more than one, each is AtW and none HoldsBack (which one is the least
// among sources sending together changes from batch to batch), and atW is how many, listed or not.
// total is how many are held. It
// copies the figures under the watermark's lock (a batch's End takes it to observe its sources)
// and sorts them after.
func (e *Engine) Sources(limit int, tie int64) (views []SourceView, total, atW int) {
	w := e.wm
	if !w.perSource {
		return nil, 0, 0
	}
	now := e.clock.Now()
	t := &w.sources
	w.mu.Lock()
	t.lookupMu.RLock()
	holder, holderMax := -1, int64(0)
	for i := range t.slots {
		sl := &t.slots[i]
		if !sl.inUse || (i == 0 && !sl.hasEvent) {
			continue
		}
		v := SourceView{Key: []byte(sl.key), Shared: i == 0, LastHeard: sl.lastHeard, Idle: now-sl.lastHeard >= w.sourceIdle}
		if sl.hasEvent {
			v.Watermark, v.HasWatermark = min(sl.maxEvent, now)-w.outOfOrder, true
			if !v.Idle && (holder < 0 || sl.maxEvent < holderMax) {
				holder, holderMax = len(views), sl.maxEvent
			}
		}
		views = append(views, v)
	}
	t.lookupMu.RUnlock()
	w.mu.Unlock()
	if holder >= 0 {
		tied := 0
		for i := range views {
			if v := &views[i]; v.HasWatermark && !v.Idle && v.Watermark-views[holder].Watermark <= tie {
				v.AtW, tied = true, tied+1
			}
		}
		if tied == 1 {
			views[holder].AtW, views[holder].HoldsBack, tied = false, true, 0
		}
		atW = tied
	}
	slices.SortStableFunc(views, func(a, b SourceView) int {
		switch {
		case a.HoldsBack != b.HoldsBack:
			return boolFirst(a.HoldsBack)
		case a.AtW != b.AtW:
			return boolFirst(a.AtW)
		case a.Idle != b.Idle:
			return -boolFirst(a.Idle)
		case a.HasWatermark != b.HasWatermark:
			return boolFirst(a.HasWatermark) // without a record accepted: after those with one
		}
		return cmp.Compare(a.Watermark, b.Watermark)
	})
	total = len(views)
	if len(views) > limit {
		views = views[:max(limit, 0)]
	}
	return views, total, atW
}

// boolFirst orders a true before a false.
func boolFirst(b bool) int {
	if b {
		return -1
	}
	return 1
}
