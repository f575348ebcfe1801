package stream

import (
	"sync"
	"sync/atomic"
)

// watermark is W (see doc.go). Without per-source tracking W follows the greatest accepted event time;
// with it, the least of the sources' greatest accepted event times, over the sources heard from
// within sourceIdle. Either way the event time is first clamped to the wall clock (a record stamped ahead of the
// collector's clock cannot push W past it), max_out_of_orderness is taken off, the idle rule may raise
// the result, and W never moves back.
type watermark struct {
	outOfOrder int64
	idle       int64 // 0: off

	perSource  bool
	sourceIdle int64
	maxSources int

	// event is the event time W follows: the greatest accepted one, or with per-source tracking the
	// least of the active sources' greatest ones (minTime while none is active).
	event atomic.Int64
	floor atomic.Int64 // W reached through the idle rule
	high  atomic.Int64 // the greatest W handed out, so that W never moves back
	// recheck is the wall time at which an active source falls silent and event must be recomputed
	// (per-source only; maxTime: never).
	recheck atomic.Int64

	mu sync.Mutex // orders observe, tick and the source table's changes
	// lastAccept is the wall time of the last batch with an accepted record, or of the start after a
	// restore (time the collector was not running is not silence); 0 while neither has happened.
	lastAccept int64
	wAtAccept  int64 // W at lastAccept: the idle rule advances from it
	sources    sourceTable
}

func newWatermark(c Config) *watermark {
	w := &watermark{
		outOfOrder: int64(c.MaxOutOfOrderness), idle: int64(c.IdleTimeout),
		perSource: c.PerSource, sourceIdle: int64(c.SourceIdleTimeout), maxSources: c.MaxSources,
	}
	w.event.Store(minTime)
	w.floor.Store(minTime)
	w.high.Store(minTime)
	w.recheck.Store(maxTime)
	w.wAtAccept = minTime
	if w.perSource {
		w.sources.init(w.maxSources)
	}
	return w
}

// current returns W at wall time now.
func (w *watermark) current(now int64) int64 {
	if w.perSource && now >= w.recheck.Load() {
		w.mu.Lock()
		w.expireSources(now)
		w.mu.Unlock()
	}
	return w.raise(w.candidate(now))
}

// raise makes W at least v and returns W.
func (w *watermark) raise(v int64) int64 {
	for {
		h := w.high.Load()
		if v <= h {
			return h
		}
		if w.high.CompareAndSwap(h, v) {
			return v
		}
	}
}

// candidate is W before the rule that it never moves back: the clamped event time less
// max_out_of_orderness, or the idle rule's value if that is greater.
func (w *watermark) candidate(now int64) int64 {
	v := minTime
	if e := w.event.Load(); e > minTime {
		v = min(e, now) - w.outOfOrder
	}
	return max(v, w.floor.Load())
}

// heldBy says what holds W where it is at wall time now.
func (w *watermark) heldBy(now int64) HeldBy {
	e, f := w.event.Load(), w.floor.Load()
	switch {
	case e <= minTime && f <= minTime && w.high.Load() <= minTime:
		return heldByNothing
	case e <= minTime && f <= minTime:
		return heldBySource // every source has fallen silent: W stays where the last one left it
	case e <= minTime || f > min(e, now)-w.outOfOrder:
		return heldByIdle
	case e > now:
		return heldByClock
	case w.perSource:
		return heldBySource
	}
	return heldByRecords
}

// observe records that a batch at wall time now accepted records up to event time maxT (without
// per-source tracking), or, with it, the greatest accepted event time of each of its sources.
func (w *watermark) observe(maxT, now int64, touched []sourceTouch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.perSource {
		if w.sources.observe(touched, now, w.sourceIdle) {
			w.publishSources(now)
		} else {
			least, next := w.sources.held()
			w.event.Store(least)
			w.recheck.Store(next)
		}
	} else if maxT > w.event.Load() {
		w.event.Store(maxT)
	}
	w.lastAccept = now
	w.wAtAccept = w.raise(w.candidate(now))
}

// tick applies the idle rule at wall time now: after idle_timeout without an accepted record, W
// advances with the wall clock from where it stood then, and never past now - max_out_of_orderness.
func (w *watermark) tick(now int64) {
	if !w.perSource && w.idle <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.perSource {
		w.expireSources(now)
	}
	if w.idle <= 0 || w.lastAccept == 0 || w.wAtAccept <= minTime {
		return // the rule is off, or nothing was accepted yet: there is no event time to advance from
	}
	silent := now - w.lastAccept
	if silent < w.idle {
		return
	}
	if f := min(w.wAtAccept+silent, now-w.outOfOrder, maxTime); f > w.floor.Load() {
		w.floor.Store(f)
	}
}

// expireSources drops the sources silent for sourceIdle at wall time now (under mu) and republishes
// event. A source holds W back until it falls silent, and W never moves back: when every source has
// fallen silent by now, W first takes the value it had at the last instant some were heard from,
// whether or not it was read then. (While some are, W at now is the greatest it has been since the
// last call: fewer sources hold it back as time goes.)
func (w *watermark) expireSources(now int64) {
	if least, at, ok := w.sources.lastHeld(now, w.sourceIdle); ok {
		w.raise(min(least, at) - w.outOfOrder)
	}
	w.sources.expire(now, w.sourceIdle)
	w.publishSources(now)
}

// publishSources sets event and recheck from the source table (under mu).
func (w *watermark) publishSources(now int64) {
	least, next := w.sources.least(now, w.sourceIdle)
	w.event.Store(least)
	w.recheck.Store(next)
}

// lookup returns the source of key (see sourceTable.lookup). A new source holds a slot until it falls
// silent, an accepted record or not: its silence is to be checked for.
func (w *watermark) lookup(key []byte, now int64) (idx int32, gen uint32, shared bool) {
	idx, gen, shared, fresh := w.sources.lookup(key, now)
	if fresh {
		w.mu.Lock()
		w.sources.recheckBy(now, w.sourceIdle)
		w.recheck.Store(min(w.recheck.Load(), now+w.sourceIdle))
		w.mu.Unlock()
	}
	return idx, gen, shared
}

// watermarkState is the watermark's part of a snapshot.
type watermarkState struct {
	event, floor, high int64
	sources            []sourceState
}

// state is the watermark at wall time now, for a snapshot: the sources silent by then are not in it.
func (w *watermark) state(now int64) watermarkState {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.perSource && now >= w.recheck.Load() {
		w.expireSources(now)
	}
	st := watermarkState{event: w.event.Load(), floor: w.floor.Load(), high: w.high.Load()}
	if w.perSource {
		st.sources = w.sources.state()
	}
	return st
}

// restore loads a snapshot's watermark at wall time now, the start: the idle rule and every restored
// source's silence are counted from it, not from before the restart.
func (w *watermark) restore(st watermarkState, now int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.floor.Store(st.floor)
	w.high.Store(st.high)
	if w.perSource {
		w.sources.restore(st.sources, now)
		w.publishSources(now)
	} else {
		w.event.Store(st.event)
	}
	if st.high > minTime {
		w.lastAccept, w.wAtAccept = now, st.high
	}
}

// HeldBy says what holds the watermark back: what W would move with. Its values run from 0, and
// String names each of them, for telemetry.
type HeldBy uint8

const (
	// heldByNothing: no record has been accepted; W is below every timestamp.
	heldByNothing HeldBy = iota
	// heldByRecords: the greatest accepted event time (without per-source tracking).
	heldByRecords
	// heldBySource: the slowest active source's greatest accepted event time.
	heldBySource
	// heldByClock: the wall clock, because records are stamped ahead of it (the clamp).
	heldByClock
	// heldByIdle: the idle rule.
	heldByIdle
	numHeldBy
)

var heldByNames = [numHeldBy]string{"none", "records", "source", "clock", "idle"}

// String returns the snake_case name, as used in the telemetry's held_by attribute, or "unknown" past
// the last value.
func (h HeldBy) String() string { return nameOf(heldByNames[:], h) }

// sourceCount returns the number of sources held.
func (w *watermark) sourceCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sources.count()
}
