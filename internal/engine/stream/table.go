package stream

// seriesTable is a shard's index of its regular series: open addressing with linear probing, keyed
// by the hash the engine computed once per record (which also picked the shard), so that a lookup
// hashes nothing and compares a key only when the full 64-bit hashes match.
type seriesTable struct {
	slots []tableSlot // len is a power of two, or 0
	n     int         // series held
}

type tableSlot struct {
	hash uint64
	se   *series // nil: empty
}

// minTableSlots is the size of a table's first allocation.
const minTableSlots = 16

// pos is the first slot to probe for hash h. The low bits of h picked the shard, so the table uses
// the high ones.
func (t *seriesTable) pos(h uint64) int { return int(h>>32) & (len(t.slots) - 1) }

// find returns the series of aggregation agg with key, whose hash is h, or nil.
func (t *seriesTable) find(h uint64, agg int, key []byte) *series {
	if len(t.slots) == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.pos(h); ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.se == nil {
			return nil
		}
		if sl.hash == h && int(sl.se.agg) == agg && sl.se.key == string(key) {
			return sl.se
		}
	}
}

// insert adds se, which must not be held yet; se.hash must be set.
func (t *seriesTable) insert(se *series) {
	if (t.n+1)*4 > len(t.slots)*3 { // keep the load at most 3/4
		t.grow()
	}
	t.place(se)
	t.n++
}

func (t *seriesTable) place(se *series) {
	mask := len(t.slots) - 1
	i := t.pos(se.hash)
	for t.slots[i].se != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = tableSlot{hash: se.hash, se: se}
}

func (t *seriesTable) grow() {
	old := t.slots
	t.slots = make([]tableSlot, max(minTableSlots, 2*len(old)))
	for _, sl := range old {
		if sl.se != nil {
			t.place(sl.se)
		}
	}
}

// remove takes se out of the table, shifting back the entries that probed past its slot so that no
// probe sequence is broken (no tombstones).
func (t *seriesTable) remove(se *series) {
	if len(t.slots) == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.pos(se.hash)
	for t.slots[i].se != se {
		if t.slots[i].se == nil {
			return // not held
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: move up every later entry of the run whose home slot does not lie
	// cyclically in (i, j].
	for j := (i + 1) & mask; t.slots[j].se != nil; j = (j + 1) & mask {
		home := t.pos(t.slots[j].hash)
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = tableSlot{}
	t.n--
}
