// Package dedup remembers the identities of the records a component has aggregated, so that a copy
// of one that arrives again (an exporter's retry, a queue's replay, a fan-out that re-runs its
// consumers) is recognised and not counted twice.
//
// An identity is a 64-bit hash of what identifies a record. It is kept by the record's own event
// time, in slices of event time (a divisor of the window's slide, about a second): a copy carries its
// original's timestamps, so it is always looked for in the slice its original went to, and is
// compared only with the identities of that slice. Mostly in-order traffic touches only the newest
// slices, which stay in the processor's caches however many identities the set holds; an identity is
// remembered until the watermark reaches the W at which its record would be expired anyway (its
// expiry, the same for every identity of a slice that lies in one slide), and a slice is dropped whole
// once W reaches the greatest expiry it holds, with no sweep.
//
// The set holds at most a configured number of identities: past it, a new identity is not remembered
// (Overflow), so that its record is aggregated as it would be without the set: a record is never
// taken for a copy of one it was not, but for a 64-bit collision within its slice (at most n/2^64 per
// record, n the identities of the slice).
//
// A slice's table is an open-addressing table of buckets of eight identities (a cache line), probed
// bucket after bucket from one picked by the identity's high bits; it is sized from the slice before
// it and kept between 72% and 92% full, so that an identity takes 8.7 to 11.1 bytes. Claims come a
// batch at a time (Claims): grouped by slice, each slice's lock is taken once for its group, and the
// buckets of the claims ahead are prefetched. The package has no collector imports.
package dedup

import (
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
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
	max   int64
	width int64
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
	// stored are the indexes of the parts the storage holds, as of the last checkpoint saved
	stored map[int64]struct{}
}

// slice is the identities whose event times lie in [index*width, (index+1)*width).
type slice struct {
	mu    sync.Mutex
	index int64
	// expiry is the greatest expiry of the identities claimed in it: at it, the slice is dropped
	expiry  int64
	buckets []bucket
	// n is the identities held, used the entries taken (released ones included)
	n, used int
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

// New returns a set that holds at most maxIDs identities, in slices of width nanoseconds of event
// time (a divisor of the slide: its identities then expire together).
func New(maxIDs int, width int64) *Set {
	return &Set{max: int64(maxIDs), width: max(width, 1), slices: map[int64]*slice{}, newest: minTime, stored: map[int64]struct{}{}}
}

const minTime = -1 << 63

// SliceWidth is the width of a set's slices for windows of the given slide: the largest divisor of
// the slide not above a second, so that a slice lies within one slide; the slide itself if it is no
// more than a second, or if it has no such divisor near a second.
func SliceWidth(slide int64) int64 {
	const second = int64(1e9)
	if slide <= second {
		return max(slide, 1)
	}
	k := (slide + second - 1) / second
	for d := k; d <= 2*k; d++ {
		if slide%d == 0 {
			return slide / d
		}
	}
	return second
}

func (s *Set) indexOf(t int64) int64 {
	if t < 0 {
		return (t+1)/s.width - 1
	}
	return t / s.width
}

// Claims claims a batch of items at watermark w, answering each in out (as long as items): an item
// whose expiry W has reached is Passed; an identity held is a Duplicate (also of an item before it in
// the batch); a new one is Remembered, or an Overflow when the set is full. The items are taken slice
// by slice, each slice's lock once; within a slice in the order given, so that of two copies in one
// batch the first is the one remembered. An identity claimed Remembered whose record turns out not
// to be aggregated is to be Released. order is scratch the caller may keep across calls.
func (s *Set) Claims(items []Item, w int64, out []Claim, order []int32) []int32 {
	order = order[:0]
	first, same := int64(0), true
	for i := range items {
		if items[i].Expiry <= w {
			out[i] = Passed
			continue
		}
		idx := s.indexOf(items[i].Time)
		if len(order) == 0 {
			first = idx
		} else if idx != first {
			same = false
		}
		order = append(order, int32(i))
	}
	if !same {
		slices.SortStableFunc(order, func(a, b int32) int {
			ia, ib := s.indexOf(items[a].Time), s.indexOf(items[b].Time)
			switch {
			case ia < ib:
				return -1
			case ia > ib:
				return 1
			}
			return 0
		})
	}
	s.mu.RLock()
	for from := 0; from < len(order); {
		idx := s.indexOf(items[order[from]].Time)
		to := from + 1
		for to < len(order) && s.indexOf(items[order[to]].Time) == idx {
			to++
		}
		s.claimGroup(idx, items, order[from:to], out)
		from = to
	}
	s.mu.RUnlock()
	return order
}

// Claim claims one item at watermark w (see Claims).
func (s *Set) Claim(it Item, w int64) Claim {
	if it.Expiry <= w {
		return Passed
	}
	var out [1]Claim
	s.mu.RLock()
	s.claimGroup(s.indexOf(it.Time), []Item{it}, []int32{0}, out[:])
	s.mu.RUnlock()
	return out[0]
}

// claimGroup claims the items of one slice (under the read lock of mu, which it may let go and take
// again to add the slice).
func (s *Set) claimGroup(idx int64, items []Item, group []int32, out []Claim) {
	sl := s.slice(idx)
	sl.mu.Lock()
	for sl.dropped { // dropped since it was looked up: the set has another by now, or none
		sl.mu.Unlock()
		sl = s.slice(idx)
		sl.mu.Lock()
	}
	room := int64(0) // identities reserved and not yet taken
	for k, i := range group {
		if k+prefetchAhead < len(group) && len(sl.buckets) > 0 {
			prefetch(unsafe.Pointer(&sl.buckets[sl.home(items[group[k+prefetchAhead]].ID)]))
		}
		it := &items[i]
		if sl.has(it.ID) {
			out[i] = Duplicate
			continue
		}
		if room == 0 {
			if room = s.reserve(reserveChunk); room == 0 {
				out[i] = Overflow
				continue
			}
		}
		room--
		sl.insert(it.ID)
		sl.expiry = max(sl.expiry, it.Expiry)
		sl.dirty = true
		if sl.marked {
			sl.after = append(sl.after, it.ID)
		}
		out[i] = Remembered
	}
	if room > 0 {
		s.held.Add(-room)
	}
	sl.mu.Unlock()
}

// prefetchAhead is how many claims ahead a claim's bucket is prefetched; reserveChunk how many
// identities a group reserves at once.
const (
	prefetchAhead = 16
	reserveChunk  = 64
)

// reserve takes room for up to n identities more, as much as the set has, and returns how many.
func (s *Set) reserve(n int64) int64 {
	for {
		held := s.held.Load()
		room := min(n, s.max-held)
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
// for as many identities as the newest before it held, and the slice two before it, which records
// seldom reach any more, is compacted.
func (s *Set) slice(idx int64) *slice {
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
			if old := s.slices[idx-2]; old != nil && idx-2 <= s.newest {
				old.mu.Lock()
				old.compact()
				old.mu.Unlock()
			}
			s.newest, n = idx, s.prevCount
		}
		sl = &slice{index: idx}
		sl.buckets = make([]bucket, bucketsFor(n))
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

// has reports whether the slice holds id. A bucket is compared whole, without a branch per entry;
// buckets fill from the front, so one whose last entry is empty ends the probe sequence.
func (sl *slice) has(id ID) bool {
	nb := len(sl.buckets)
	for i := sl.home(id); ; {
		b := &sl.buckets[i]
		if b[0] == id || b[1] == id || b[2] == id || b[3] == id || b[4] == id || b[5] == id || b[6] == id || b[7] == id {
			return true
		}
		if b[bucketLen-1] == empty {
			return false
		}
		if i++; i == nb {
			i = 0
		}
	}
}

// insert puts id, which the slice does not hold, in the first empty entry of its probe sequence,
// growing the table first if it is full enough.
func (sl *slice) insert(id ID) {
	if float64(sl.used+1) > maxLoad*float64(len(sl.buckets)*bucketLen) {
		sl.rebuild(bucketsFor(max(sl.n+1, sl.n*3/2)))
	}
	sl.put(id)
	sl.n++
	sl.used++
}

// put puts id in the first empty entry of its probe sequence.
func (sl *slice) put(id ID) {
	nb := len(sl.buckets)
	for i := sl.home(id); ; {
		b := &sl.buckets[i]
		for j, e := range b {
			if e == empty {
				b[j] = id
				return
			}
		}
		if i++; i == nb {
			i = 0
		}
	}
}

// rebuild makes the table anew with nb buckets, without its released entries.
func (sl *slice) rebuild(nb int) {
	old := sl.buckets
	sl.buckets = make([]bucket, nb)
	sl.used = 0
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
	if sl.dropped {
		return
	}
	nb := len(sl.buckets)
	for i := sl.home(id); ; {
		b := &sl.buckets[i]
		for j, e := range b {
			switch e {
			case id:
				b[j] = released // the probe sequences through it go on
				sl.n--
				sl.dirty = true
				s.held.Add(-1)
				return
			case empty:
				return
			}
		}
		if i++; i == nb {
			i = 0
		}
	}
}

// Forget drops the slices whose expiry W (w) has reached.
func (s *Set) Forget(w int64) {
	s.mu.RLock()
	any := false
	for _, sl := range s.slices {
		if sl.expiryAt() <= w {
			any = true
			break
		}
	}
	s.mu.RUnlock()
	if !any {
		return
	}
	s.mu.Lock()
	for idx, sl := range s.slices {
		sl.mu.Lock()
		if sl.expiry <= w {
			s.drop(idx, sl)
		}
		sl.mu.Unlock()
	}
	s.mu.Unlock()
}

// expiryAt reads a slice's expiry under its lock.
func (sl *slice) expiryAt() int64 {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.expiry
}

// drop takes slice sl out of the set (under mu and sl.mu).
func (s *Set) drop(idx int64, sl *slice) {
	delete(s.slices, idx)
	sl.dropped = true
	s.held.Add(int64(-sl.n))
	sl.buckets, sl.n, sl.used = nil, 0, 0
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
