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
	// npending values of the pane starting at pendingStart wait in pending to go into its sketch (and
	// acc): see addValue. They are kept by the series, not by every pane, as a record's values nearly
	// always go to its newest pane; so a pane stays small, which a fine sliding window, with many
	// panes to move at each slide, needs.
	npending     int32
	pendingStart int64
	pos          int    // index in its shard's list
	panes        []pane // sorted by start
	pending      [pendingValues]float64

	// For sliding windows with a sketch: acc holds the values of the panes in [accEnd-size, accEnd)
	// but the pending ones (see addValue), kept up to date as values are inserted and panes leave, so
	// that the next window's sketch is acc plus the pane that enters minus the pane that leaves
	// rather than a merge of every pane.
	acc    *sketch.Histogram
	accEnd int64
	accOK  bool
}

// pendingValues is how many values a series gathers before it inserts them into their pane's
// sketch. In a collector the engine's state is cold when a batch comes, and a sketch insert reads
// two or three cache lines of the sketch and one or two of its counters on top of the series' and
// the pane's; gathered, the values of many records of a series pay for those lines once.
const pendingValues = 32 // a power of two: Batch.prefetch masks with it

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

// addValue adds v, a value of pane p, to the series' pending values. They belong to one pane: a
// value of another pane first inserts them. When they are full, it inserts them into the pane's
// sketch and, if the pane is in acc's range, into acc.
//
// Every reader of a pane's sketch or of acc must call insertPending first: the shard does at every
// flush point (flushSeries) and for a snapshot. Between two flush points nothing reads them, and acc's
// range moves only at a flush point, so a pending value goes into acc exactly when its pane is in
// acc's range when it is inserted, as it would have had it been inserted at once.
func (s *series) addValue(p *pane, v float64, size int64) {
	if s.npending > 0 && s.pendingStart != p.start {
		s.insertPending(size)
	}
	s.pendingStart = p.start
	s.pending[s.npending] = v
	s.npending++
	if s.npending == pendingValues {
		s.insertInto(p, size)
	}
}

// insertInto inserts the pending values into p, their pane: into its sketch, and into acc if p is in
// acc's range.
func (s *series) insertInto(p *pane, size int64) {
	vs := s.pending[:s.npending]
	for _, v := range vs {
		p.hist.Insert(v)
	}
	if s.inAcc(p.start, size) {
		for _, v := range vs {
			s.acc.Insert(v)
		}
	}
	s.npending = 0
}

// insertPending inserts the pending values into their pane: see addValue.
func (s *series) insertPending(size int64) {
	if s.npending == 0 {
		return
	}
	p := s.paneAt(s.pendingStart)
	if p == nil || p.hist == nil {
		panic("stream: pending values without their pane's sketch")
	}
	s.insertInto(p, size)
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
// The pending values must have been inserted (flushSeries does so first).
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
