package stream

import "sort"

// series is one distinct key of one aggregation, with its live panes.
type series struct {
	key      string
	agg      int
	overflow bool
	pos      int     // index in its shard's list
	panes    []*pane // sorted by start
}

// pane returns the series' pane starting at start, creating it if needed.
func (s *series) pane(start int64, pool *panePool, a *Aggregation) *pane {
	n := len(s.panes)
	// Records mostly go to the newest pane: look there first.
	if n > 0 && s.panes[n-1].start == start {
		return s.panes[n-1]
	}
	i := n
	if n > 0 && s.panes[n-1].start > start {
		i = sort.Search(n, func(j int) bool { return s.panes[j].start >= start })
		if s.panes[i].start == start {
			return s.panes[i]
		}
	}
	p := pool.get(start, a)
	s.panes = append(s.panes, nil)
	copy(s.panes[i+1:], s.panes[i:])
	s.panes[i] = p
	return p
}

// firstPaneFrom returns the index of the first pane starting at or after t.
func (s *series) firstPaneFrom(t int64) int {
	return sort.Search(len(s.panes), func(j int) bool { return s.panes[j].start >= t })
}

// dropPanesBefore returns to the pool every pane starting before t.
func (s *series) dropPanesBefore(t int64, pool *panePool) {
	i := 0
	for i < len(s.panes) && s.panes[i].start < t {
		pool.put(s.panes[i])
		i++
	}
	if i == 0 {
		return
	}
	n := copy(s.panes, s.panes[i:])
	clear(s.panes[n:])
	s.panes = s.panes[:n]
}
