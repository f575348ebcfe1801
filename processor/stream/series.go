package stream

import (
	"unsafe"

	"github.com/windowaggregator/windowaggregator/processor/sketch"
)

// series is one distinct key of one aggregation, with its live panes.
type series struct {
	// The fields that finding a series compares come first, with a short key in the series itself
	// (see setKey), so that finding one reads one or two cache lines, not the series and then its key.
	key    string
	hash   uint64 // of agg and key, as Engine.hash
	agg    int
	keyBuf [inlineKeyLen]byte

	overflow bool
	// pendingPanes is how many panes hold pending values (see addValue); they are nearly always the
	// newest, so insertPending looks from the newest pane back and stops when it has found them all.
	// It could be counted from the panes, but reading every pane's npending at every flush point
	// costs a series of 60 panes (sliding 1m/1s, 100k series: 9.4-9.9 us per record against
	// 8.4-9.2 with the count, BenchmarkIngest, three alternated runs).
	pendingPanes int32
	pos          int    // index in its shard's list
	panes        []pane // sorted by start

	// For sliding windows with a sketch: acc holds the values of the panes in [accEnd-size, accEnd)
	// but their pending ones (see addValue), kept up to date as panes insert their values and leave,
	// so that the next window's sketch is acc plus the pane that enters minus the pane that leaves
	// rather than a merge of every pane.
	acc    *sketch.Histogram
	accEnd int64
	accOK  bool
}

// inlineKeyLen is the longest key a series holds in itself. Three short strings, such as service,
// span name and method, take about 45 bytes. The series grows by 48 bytes, what a key of 33 to 48
// bytes took in an allocation of its own; a longer key, which still has one, leaves them unused.
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
func (s *series) pane(start int64, sp *sketchPool, a *Aggregation) *pane {
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
	s.panes[i] = newPane(start, a, sp)
	return &s.panes[i]
}

// paneAt returns the pane starting at start, or nil.
func (s *series) paneAt(start int64) *pane {
	if i := s.firstPaneFrom(start); i < len(s.panes) && s.panes[i].start == start {
		return &s.panes[i]
	}
	return nil
}

// addValue adds v to the sketches of pane p: to its pending values, and when they are full, it
// inserts them into the pane's sketch and, if the pane is in acc's range, into acc.
//
// Every reader of a pane's sketch or of acc must call insertPending first: the shard does at every
// flush point (flushSeries) and for a snapshot. Between two flush points nothing reads them, and acc's
// range moves only at a flush point, so a pending value goes into acc exactly when its pane is in
// acc's range when it is inserted, as it would have had it been inserted at once.
func (s *series) addValue(p *pane, v float64, size int64) {
	if p.npending == 0 {
		s.pendingPanes++
	}
	p.pending[p.npending] = v
	p.npending++
	if p.npending == len(p.pending) {
		s.insertPane(p, size)
	}
}

// insertPane inserts pane p's pending values into its sketch, and into acc if p is in acc's range.
func (s *series) insertPane(p *pane, size int64) {
	vs := p.pending[:p.npending]
	for _, v := range vs {
		p.hist.Insert(v)
	}
	if s.inAcc(p.start, size) {
		for _, v := range vs {
			s.acc.Insert(v)
		}
	}
	p.npending = 0
	s.pendingPanes--
}

// insertPending inserts every pane's pending values: see addValue.
func (s *series) insertPending(size int64) {
	for i := len(s.panes) - 1; i >= 0 && s.pendingPanes > 0; i-- {
		if s.panes[i].npending > 0 {
			s.insertPane(&s.panes[i], size)
		}
	}
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
func (s *series) dropPanesBefore(t, size int64, sp *sketchPool) {
	i := 0
	for i < len(s.panes) && s.panes[i].start < t {
		p := &s.panes[i]
		if s.inAcc(p.start, size) && p.hist != nil && !s.acc.Subtract(p.hist) {
			s.accOK = false
		}
		p.release(sp)
		i++
	}
	if i == 0 {
		return
	}
	n := copy(s.panes, s.panes[i:])
	clear(s.panes[n:])
	s.panes = s.panes[:n]
}
