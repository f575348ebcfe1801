// Package dedup remembers the identities of the records a component has aggregated, so that a copy
// of one that arrives again (an exporter's retry, a queue's replay, a fan-out that re-runs its
// consumers) is recognised and not counted twice.
//
// An identity is a 64-bit hash of what identifies a record. It is kept by the record's own event
// time, in slices of event time (2^30 ns, about a second, or a power of two no wider than the
// window's slide): a copy carries its original's timestamps, so it is always looked for in the slice
// its original went to, and is compared only with the identities of that slice. Mostly in-order traffic touches only the newest
// slices, which stay in the processor's caches however many identities the set holds; an identity is
// remembered until the watermark reaches the W at which its record would be expired anyway (its
// expiry, the same for every identity of a slice that lies in one slide), and a slice is dropped whole
// once W reaches the greatest expiry it holds, with no sweep; a claim of a record W has passed is
// Passed whatever its slice holds.
//
// The set holds at most a configured number of identities: past it, a new identity is not remembered
// (Overflow), so that its record is aggregated as it would be without the set: a record is never
// taken for a copy of one it was not, but for a 64-bit collision within its slice (at most n/2^64 per
// record, n the identities of the slice).
//
// A slice's table is an open-addressing table of buckets of eight identities (a cache line), probed
// bucket after bucket from one picked by the identity's high bits; it is sized from the slice before
// it and kept between 72% and 92% full, so that an identity takes 8.7 to 11.1 bytes. A caller claims
// through a Claimer, which keeps the slices it used last at hand: records mostly come in order, so
// that a claim takes its slice's lock and one walk of its table, with no lookup of the slice. The
// package has no collector imports.
package dedup

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// ID is a record's identity: a 64-bit hash of what identifies it (see Fold).
type ID uint64

// The two identities a table keeps for itself: an empty entry and a released one. Fold moves a hash
// that falls on them.
const (
	empty    ID = 0
	released ID = 1
)

// Fold makes a 64-bit hash an identity (it moves the two values the tables keep for themselves).
func Fold(h uint64) ID {
	if h <= uint64(released) {
		h += 2
	}
	return ID(h)
}

// Claim is what the set made of an identity.
type Claim uint8

const (
	// Remembered: not seen before (or seen and forgotten); remembered from now until its expiry.
	Remembered Claim = iota
	// Duplicate: seen before, and still remembered: the record is a copy.
	Duplicate
	// Passed: not looked up, as W has passed its expiry already: the record is expired, and a copy
	// of it will be too.
	Passed
	// Overflow: not seen before, and not remembered: the set holds its maximum of identities.
	Overflow
)

// Item is a record to claim: its identity, its event time and its expiry (the W at which it is
// forgotten, after its time).
type Item struct {
	ID     ID
	Time   int64
	Expiry int64
}

// Set is a bounded set of identities, kept by event time.
type Set struct {
	max int64
	// shift: a slice is 2^shift nanoseconds of event time
	shift uint8
	// held is the number of identities held, those of slices W has passed that no Forget has dropped
	// yet included.
	held atomic.Int64

	// mu guards slices and newest: a claim reads them under the read lock, and takes the write lock
	// only to add a slice; Forget and Restore take it to drop slices.
	mu     sync.RWMutex
	slices map[int64]*slice
	// newest is the greatest slice index yet; prevCount the identities of the slice that was the
	// newest before it, when it became so: the size a new slice is given.
	newest    int64
	prevCount int
	// due is at most the least expiry of the slices (claims only raise a slice's): forget has nothing
	// to drop before W reaches it
	due int64
	// stored are the indexes of the parts the storage holds, as of the last checkpoint saved
	stored map[int64]struct{}
}

// slice is the identities whose event times lie in [index<<shift, (index+1)<<shift).
type slice struct {
	mu    sync.Mutex
	index int64
	// expiry is the greatest expiry of the identities claimed in it: at it, the slice is dropped
	expiry  int64
	buckets []bucket
	// n is the identities held, used the entries taken (released ones included), limit the most
	// entries taken before the table grows
	n, used, limit int
	// dropped: Forget or Restore took the slice out of the set; a claim that finds it so looks again
	dropped bool
	// checkpoint bookkeeping (see checkpoint.go)
	dirty  bool
	marked bool
	after  []ID
	saved  savedPart
}

// bucket is a cache line of identities, filled from the front.
type bucket [bucketLen]ID

const (
	bucketLen = 8
	// minBuckets is a slice's least table.
	minBuckets = 4
	// A table grows past maxLoad of its entries, and is made anew at fitLoad when it grows, when it
	// is compacted (below minLoad, once it is no longer among the newest), or when it is first sized.
	maxLoad, fitLoad, minLoad = 0.92, 0.82, 0.72
)

// New returns a set that holds at most maxIDs identities, in slices of 2^shift nanoseconds of event
// time.
func New(maxIDs int, shift uint8) *Set {
	return &Set{max: int64(maxIDs), shift: min(shift, maxShift), slices: map[int64]*slice{}, newest: minTime, due: maxTime, stored: map[int64]struct{}{}}
}

const (
	minTime = -1 << 63
	maxTime = 1<<63 - 1
)

// SliceShift is the shift of a set's slices for windows of the given slide: slices of a power of
// two nanoseconds, so that a record's slice is its time shifted, with no division; the largest not
// above the slide and maxShift. A slice that spans a slide's end holds identities of two expiries, and
// keeps those of the earlier one until the later: at most one slice a slide.
func SliceShift(slide int64) uint8 {
	shift := uint8(0)
	for shift < maxShift && int64(1)<<(shift+1) <= slide {
		shift++
	}
	return shift
}

// maxShift makes slices of at most 2^30 ns, 1.07 s: a batch's records, which span about a second of
// event time, mostly fall in one or two. (Slices of 134 ms, whose tables stay in the nearer caches at
// 50,000 records a second, measured no faster there and slower at 1,000 a second, where a batch's
// records in random order took turns among eight slices: bench/README.)
const maxShift = 30

func (s *Set) indexOf(t int64) int64 { return t >> s.shift }

// Claimer claims identities one at a time for one caller (an ingest call), keeping the slices it
// used last at hand and the room it reserved: records mostly come in order, so that most claims take
// only their slice's lock, with no lookup of the slice. Done gives back the room unused.
type Claimer struct {
	s    *Set
	room int64
	// recent are the slices used last, by index modulo their number: records a little out of order
	// (a batch's spans across a slice's end) find theirs with no lookup
	recent [recentSlices]*slice
}

// recentSlices is how many slices a claimer keeps at hand.
const recentSlices = 16

// Claimer returns a claimer of the set's identities.
func (s *Set) Claimer() Claimer { return Claimer{s: s} }

// Claim claims an item at watermark w: an item whose expiry W has reached is Passed; an identity
// held is a Duplicate; a new one is Remembered, or an Overflow when the set is full. An identity
// claimed Remembered whose record turns out not to be aggregated is to be Released.
func (c *Claimer) Claim(it Item, w int64) Claim {
	if it.Expiry <= w {
		return Passed
	}
	sl := c.locked(it, w)
	defer sl.mu.Unlock()
	if c.room == 0 {
		c.room = c.s.reserve(reserveChunk)
	}
	switch {
	case c.room == 0: // full: looked up, not remembered
		if sl.has(it.ID) {
			return Duplicate
		}
		return Overflow
	case sl.claim(it.ID):
		return Duplicate
	}
	c.room--
	sl.expiry = max(sl.expiry, it.Expiry)
	sl.dirty = true
	if sl.marked {
		sl.after = append(sl.after, it.ID)
	}
	return Remembered
}

// locked returns the slice of the item's time, its lock taken: one at hand, else looked up (and
// added); one dropped since it was looked up is found out under its lock, and looked up again. A
// slice's index never changes, so that it is read without the lock.
func (c *Claimer) locked(it Item, w int64) *slice {
	idx := c.s.indexOf(it.Time)
	at := &c.recent[idx&(recentSlices-1)]
	for {
		sl := *at
		if sl == nil || sl.index != idx {
			c.s.mu.RLock()
			sl = c.s.slice(idx, w, it.Expiry)
			c.s.mu.RUnlock()
			*at = sl
		}
		sl.mu.Lock()
		if !sl.dropped {
			return sl
		}
		sl.mu.Unlock()
		*at = nil
	}
}

// Done gives back the room the claimer reserved and did not take.
func (c *Claimer) Done() {
	if c.room > 0 {
		c.s.held.Add(-c.room)
	}
	c.room, c.recent = 0, [recentSlices]*slice{}
}

// reserveChunk is how many identities a claimer reserves at once.
const reserveChunk = 64

// reserve takes room for up to n identities more, and returns how many: near the maximum, a
// sixteenth of the room left at most, so that a claimer keeps little of the last room from another.
func (s *Set) reserve(n int64) int64 {
	for {
		held := s.held.Load()
		room := min(n, max(1, (s.max-held)/16), s.max-held)
		if room <= 0 {
			return 0
		}
		if s.held.CompareAndSwap(held, held+room) {
			return room
		}
	}
}

// slice returns the slice of index idx, adding it if there is none (called under the read lock of
// mu, which it lets go and takes again to add one). A new slice that is the newest yet is sized
// for as many identities as the newest before it held, the slice two before it, which records
// seldom reach any more, is compacted, and the slices whose expiry W (w) has reached are dropped:
// with records in order, once a slice width of event time.
func (s *Set) slice(idx, w, expiry int64) *slice {
	if sl := s.slices[idx]; sl != nil {
		return sl
	}
	s.mu.RUnlock()
	s.mu.Lock()
	sl := s.slices[idx]
	if sl == nil {
		n := 0
		if idx > s.newest {
			if prev := s.slices[s.newest]; prev != nil {
				prev.mu.Lock()
				s.prevCount = prev.n
				prev.mu.Unlock()
			}
			if old := s.slices[idx-2]; old != nil {
				old.mu.Lock()
				old.compact()
				old.mu.Unlock()
			}
			s.newest, n = idx, s.prevCount
			s.forget(w)
		}
		sl = &slice{index: idx, expiry: expiry}
		s.due = min(s.due, expiry)
		sl.setTable(make([]bucket, bucketsFor(n)))
		s.slices[idx] = sl
	}
	s.mu.Unlock()
	s.mu.RLock()
	return sl
}

// bucketsFor is the size of a table for n identities, fitLoad full.
func bucketsFor(n int) int {
	return max(minBuckets, int(float64(n)/fitLoad/bucketLen)+1)
}

// home is the bucket where id's probe sequence starts: the high bits of id times the table's size.
func (sl *slice) home(id ID) int {
	hi, _ := bits.Mul64(uint64(id), uint64(len(sl.buckets)))
	return int(hi)
}

// probe walks id's probe sequence: it returns the bucket that holds id (found), or else the first
// one with an empty entry. A bucket is compared whole; buckets fill from the front, so one whose last
// entry is empty ends the sequence.
func (sl *slice) probe(id ID) (b *bucket, found bool) {
	nb := len(sl.buckets)
	for i := sl.home(id); ; {
		b = &sl.buckets[i]
		if b[0] == id || b[1] == id || b[2] == id || b[3] == id || b[4] == id || b[5] == id || b[6] == id || b[7] == id {
			return b, true
		}
		if b[bucketLen-1] == empty {
			return b, false
		}
		if i++; i == nb {
			i = 0
		}
	}
}

// has reports whether the slice holds id.
func (sl *slice) has(id ID) bool {
	_, found := sl.probe(id)
	return found
}

// claim reports whether the slice holds id, and puts it in the first empty entry of its probe
// sequence if not, growing the table first if it is full enough: one walk of the sequence.
func (sl *slice) claim(id ID) (held bool) {
	if sl.used >= sl.limit {
		sl.rebuild(bucketsFor(max(sl.n+1, sl.n*3/2)))
	}
	b, found := sl.probe(id)
	if found {
		return true
	}
	b.put(id)
	sl.n++
	sl.used++
	return false
}

// put puts id in the bucket's first empty entry, which it has.
func (b *bucket) put(id ID) {
	for j, e := range b {
		if e == empty {
			b[j] = id
			return
		}
	}
}

// put puts id, which the slice does not hold, in the first empty entry of its probe sequence.
func (sl *slice) put(id ID) {
	b, _ := sl.probe(id)
	b.put(id)
}

// setTable makes buckets the slice's empty table.
func (sl *slice) setTable(buckets []bucket) {
	sl.buckets, sl.used = buckets, 0
	sl.limit = int(maxLoad * float64(len(buckets)*bucketLen))
}

// rebuild makes the table anew with nb buckets, without its released entries.
func (sl *slice) rebuild(nb int) {
	old := sl.buckets
	sl.setTable(make([]bucket, nb))
	for i := range old {
		for _, e := range old[i] {
			if e != empty && e != released {
				sl.put(e)
				sl.used++
			}
		}
	}
}

// compact makes the table anew at fitLoad if it is less than minLoad full.
func (sl *slice) compact() {
	if nb := bucketsFor(sl.n); float64(sl.n) < minLoad*float64(len(sl.buckets)*bucketLen) && nb < len(sl.buckets) {
		sl.rebuild(nb)
	}
}

// Release forgets an identity claimed Remembered, at time t, for a record that was not aggregated
// after all.
func (s *Set) Release(id ID, t int64) {
	s.mu.RLock()
	sl := s.slices[s.indexOf(t)]
	s.mu.RUnlock()
	if sl == nil {
		return
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.dropped { // its table is gone with it
		return
	}
	b, found := sl.probe(id)
	if !found {
		return
	}
	for j, e := range b {
		if e == id {
			b[j] = released // the probe sequences through it go on
			sl.n--
			sl.dirty = true
			s.held.Add(-1)
			return
		}
	}
}

// Forget drops the slices whose expiry W (w) has reached.
func (s *Set) Forget(w int64) {
	s.mu.RLock()
	due := w >= s.due
	s.mu.RUnlock()
	if due {
		s.mu.Lock()
		s.forget(w)
		s.mu.Unlock()
	}
}

// forget drops the slices whose expiry W (w) has reached (under mu).
func (s *Set) forget(w int64) {
	if w < s.due {
		return
	}
	s.due = maxTime
	for idx, sl := range s.slices {
		sl.mu.Lock()
		if sl.expiry <= w {
			s.drop(idx, sl)
		} else {
			s.due = min(s.due, sl.expiry)
		}
		sl.mu.Unlock()
	}
}

// drop takes slice sl out of the set (under mu and sl.mu).
func (s *Set) drop(idx int64, sl *slice) {
	delete(s.slices, idx)
	sl.dropped = true
	s.held.Add(int64(-sl.n))
	sl.buckets, sl.n, sl.used, sl.limit = nil, 0, 0, 0
}

// bytesPerID is the most an identity takes in a full set's tables: an 8-byte entry in a table at
// least minLoad full, rounded up; what the memory estimate multiplies max_ids by.
const bytesPerID = 12

// Footprint is the most memory a full set of maxIDs identities takes.
func Footprint(maxIDs int) int64 { return int64(maxIDs) * bytesPerID }

// Len returns the number of identities held, including those of slices W has passed that no Forget
// has dropped yet.
func (s *Set) Len() int { return int(s.held.Load()) }

// Max returns the most identities the set holds.
func (s *Set) Max() int { return int(s.max) }

// Slices returns the number of slices held.
func (s *Set) Slices() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.slices)
}

// savedPart is what the last successful checkpoint wrote of a slice.
type savedPart struct {
	ok  bool
	n   int
	crc uint32
}
