package stream

import (
	"sync"
	"sync/atomic"
)

// watermark is W: the greatest accepted event time minus max_out_of_orderness, and, once no record has
// been accepted for idle_timeout of wall-clock time, that value plus the wall-clock time since the last
// accepted record. W never moves back.
type watermark struct {
	outOfOrder int64
	idle       int64 // 0: off

	maxEvent   atomic.Int64 // greatest accepted event time
	floor      atomic.Int64 // W reached through the idle rule
	mu         sync.Mutex   // orders observe and tick, so that tick reads maxEvent and lastAccept together
	lastAccept int64        // wall clock of the last batch with an accepted record
}

func newWatermark(outOfOrder, idle int64) *watermark {
	w := &watermark{outOfOrder: outOfOrder, idle: idle}
	w.maxEvent.Store(minTime)
	w.floor.Store(minTime)
	return w
}

// current returns W.
func (w *watermark) current() int64 {
	m := w.maxEvent.Load()
	v := minTime
	if m > minTime {
		v = m - w.outOfOrder
	}
	return max(v, w.floor.Load())
}

// observe records that a batch ending at wall time now accepted records up to event time maxT.
func (w *watermark) observe(maxT, now int64) {
	w.mu.Lock()
	if maxT > w.maxEvent.Load() {
		w.maxEvent.Store(maxT)
	}
	w.lastAccept = now
	w.mu.Unlock()
}

// tick applies the idle rule at wall time now.
func (w *watermark) tick(now int64) {
	if w.idle <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.maxEvent.Load()
	if m <= minTime {
		return // nothing accepted yet: there is no event time to advance from
	}
	silent := now - w.lastAccept
	if silent < w.idle {
		return
	}
	if f := min(m-w.outOfOrder+silent, maxTime); f > w.floor.Load() {
		w.floor.Store(f)
	}
}

// state and restore carry the watermark through a snapshot.
func (w *watermark) state() (maxEvent, floor, lastAccept int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxEvent.Load(), w.floor.Load(), w.lastAccept
}

func (w *watermark) restore(maxEvent, floor, lastAccept int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.maxEvent.Store(maxEvent)
	w.floor.Store(floor)
	w.lastAccept = lastAccept
}
