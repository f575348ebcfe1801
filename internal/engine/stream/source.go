package stream

import "sync"

// sourceTable holds the sources of a watermark with per-source tracking: for each, the greatest event
// time it has had accepted and when it was last heard from. Slot 0 is the shared source, which every
// source past maxSources is counted in. A slot freed by a silent source is reused, with a new
// generation, so that a batch that looked up the old source does not move the new one.
type sourceTable struct {
	lookupMu sync.RWMutex // guards index and the slots' keys, so that lookups need not take the watermark's lock
	index    map[string]int32
	slots    []sourceSlot
	free     []int32
	max      int // sources held besides the shared one

	// The source that holds W back (-1: none) and its greatest accepted event time, kept up to date
	// by observe so that a batch costs a scan of every source only when the holder itself moves on.
	holder    int32
	holderMax int64
	recheck   int64 // no active source falls silent before this wall time
}

type sourceSlot struct {
	key       string
	gen       uint32
	inUse     bool
	hasEvent  bool  // some record of it was accepted: it holds W back while it is heard from
	maxEvent  int64 // greatest accepted event time
	lastHeard int64 // wall time of the last batch with an accepted record, or of its first lookup
}

// sourceTouch is what one batch saw of one source: its slot, the slot's generation at lookup, and the
// greatest event time accepted from it (minTime: none).
type sourceTouch struct {
	idx  int32
	gen  uint32
	maxT int64
}

// sourceState is one source in a snapshot.
type sourceState struct {
	key      string
	maxEvent int64
}

func (t *sourceTable) init(maxSources int) {
	t.max = maxSources
	t.index = map[string]int32{}
	t.slots = []sourceSlot{{inUse: true, maxEvent: minTime}} // the shared source
	t.holder, t.holderMax, t.recheck = -1, minTime, maxTime
}

// lookup returns the slot of the source named key, registering it if it is new (fresh is then true):
// in a slot of its own while fewer than max are held, else in the shared one (shared is then true).
func (t *sourceTable) lookup(key []byte, now int64) (idx int32, gen uint32, shared, fresh bool) {
	t.lookupMu.RLock()
	i, ok := t.index[string(key)]
	if ok {
		gen = t.slots[i].gen
	}
	t.lookupMu.RUnlock()
	if ok {
		return i, gen, false, false
	}
	t.lookupMu.Lock()
	defer t.lookupMu.Unlock()
	if i, ok := t.index[string(key)]; ok {
		return i, t.slots[i].gen, false, false
	}
	if len(t.index) >= t.max {
		return 0, t.slots[0].gen, true, false
	}
	k := string(key)
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		i = int32(len(t.slots))
		t.slots = append(t.slots, sourceSlot{})
	}
	sl := &t.slots[i]
	*sl = sourceSlot{key: k, gen: sl.gen + 1, inUse: true, maxEvent: minTime, lastHeard: now}
	t.index[k] = i
	return i, sl.gen, false, true
}

// observe takes a batch's accepted event times, per source, at wall time now. It reports whether the
// holder moved on, so that least must scan every source to find the next one.
func (t *sourceTable) observe(touched []sourceTouch, now, idle int64) (rescan bool) {
	t.lookupMu.RLock() // slots is not resized under a read lock
	defer t.lookupMu.RUnlock()
	for _, tc := range touched {
		sl := &t.slots[tc.idx]
		if tc.maxT <= minTime || !sl.inUse || sl.gen != tc.gen {
			continue // nothing accepted, or the source fell silent and its slot was reused meanwhile
		}
		if !sl.hasEvent || tc.maxT > sl.maxEvent {
			sl.maxEvent = tc.maxT
		}
		sl.hasEvent = true
		sl.lastHeard = max(sl.lastHeard, now)
		t.recheck = min(t.recheck, sl.lastHeard+idle)
		switch {
		case tc.idx == t.holder:
			rescan = true
		case t.holder < 0 || sl.maxEvent < t.holderMax:
			// A source that was not active, or is behind the holder: it holds W back now. (An active
			// source that moves on stays at or above the holder.)
			t.holder, t.holderMax = tc.idx, sl.maxEvent
		}
	}
	return rescan
}

// held returns the holder's greatest accepted event time (minTime: no active source) and the wall
// time by which least must be called again.
func (t *sourceTable) held() (least, recheck int64) { return t.holderMax, t.recheck }

// expire frees the slots of the sources not heard from for idle at wall time now. The shared source
// stays; it only stops holding W back.
func (t *sourceTable) expire(now, idle int64) {
	t.lookupMu.Lock()
	defer t.lookupMu.Unlock()
	for i := 1; i < len(t.slots); i++ {
		sl := &t.slots[i]
		if sl.inUse && now-sl.lastHeard >= idle {
			delete(t.index, sl.key)
			sl.inUse, sl.hasEvent, sl.key = false, false, ""
			t.free = append(t.free, int32(i))
		}
	}
	if sh := &t.slots[0]; sh.hasEvent && now-sh.lastHeard >= idle {
		sh.hasEvent, sh.maxEvent = false, minTime
	}
}

// least scans the sources for the one with the least greatest accepted event time among those heard
// from within idle of now, which becomes the holder, and returns that time (minTime when none is) and
// the wall time at which the first source held falls silent (one without an accepted record too: its
// slot is freed then).
func (t *sourceTable) least(now, idle int64) (least, recheck int64) {
	t.lookupMu.RLock()
	defer t.lookupMu.RUnlock()
	t.holder, t.holderMax, t.recheck = -1, minTime, maxTime
	for i := range t.slots {
		sl := &t.slots[i]
		if !sl.inUse || now-sl.lastHeard >= idle {
			continue
		}
		t.recheck = min(t.recheck, sl.lastHeard+idle)
		if !sl.hasEvent {
			continue
		}
		if t.holder < 0 || sl.maxEvent < t.holderMax {
			t.holder, t.holderMax = int32(i), sl.maxEvent
		}
	}
	return t.holderMax, t.recheck
}

// lastHeld reports, when no source with an accepted record is heard from within idle of now and some
// are held yet (they fell silent since the last expire), the least greatest accepted event time of
// the ones that fell silent last, and the last instant they were heard from within idle.
func (t *sourceTable) lastHeld(now, idle int64) (least, at int64, ok bool) {
	t.lookupMu.RLock()
	defer t.lookupMu.RUnlock()
	last := minTime
	for i := range t.slots {
		sl := &t.slots[i]
		if !sl.inUse || !sl.hasEvent {
			continue
		}
		switch silent := sl.lastHeard + idle; {
		case silent > now:
			return 0, 0, false
		case silent > last:
			last, least = silent, sl.maxEvent
		case silent == last:
			least = min(least, sl.maxEvent)
		}
	}
	return least, last - 1, last > minTime
}

// recheckBy makes sure that recheck comes no later than the silence of a source heard from at now.
func (t *sourceTable) recheckBy(now, idle int64) { t.recheck = min(t.recheck, now+idle) }

// count returns the number of sources held, the shared one included once it has been used.
func (t *sourceTable) count() int {
	t.lookupMu.RLock()
	defer t.lookupMu.RUnlock()
	n := len(t.index)
	if t.slots[0].hasEvent {
		n++
	}
	return n
}

func (t *sourceTable) state() []sourceState {
	t.lookupMu.RLock()
	defer t.lookupMu.RUnlock()
	var out []sourceState
	for i := range t.slots {
		if sl := &t.slots[i]; sl.inUse && sl.hasEvent {
			out = append(out, sourceState{key: sl.key, maxEvent: sl.maxEvent})
		}
	}
	return out
}

// restore replaces the table with a snapshot's sources, all heard from at now (the start). The shared
// source is the one with the empty key (the key of a source of its own is never empty).
func (t *sourceTable) restore(st []sourceState, now int64) {
	t.init(t.max)
	t.lookupMu.Lock()
	defer t.lookupMu.Unlock()
	for _, s := range st {
		if s.key == "" {
			t.slots[0] = sourceSlot{inUse: true, hasEvent: true, maxEvent: s.maxEvent, lastHeard: now}
			continue
		}
		if _, dup := t.index[s.key]; dup || len(t.index) >= t.max {
			continue
		}
		i := int32(len(t.slots))
		t.slots = append(t.slots, sourceSlot{key: s.key, gen: 1, inUse: true, hasEvent: true, maxEvent: s.maxEvent, lastHeard: now})
		t.index[s.key] = i
	}
}
