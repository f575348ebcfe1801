// Package dedup remembers the identities of the records a component has aggregated, so that a copy
// of one that arrives again (an exporter's retry, a queue's replay, a fan-out that re-runs its
// consumers) is recognised and not counted twice.
//
// An identity is a 128-bit hash of what identifies a record; it is remembered until the watermark
// reaches the W at which the record would be expired anyway (its expiry), and then forgotten. The
// set holds at most a configured number of identities: past it, a new identity is not remembered
// (Overflow), so that its record is aggregated as it would be without the set: a record is never
// taken for a copy of one it was not.
//
// The set is split in shards by the identity's low bits, each with its own lock, so that concurrent
// batches claim identities side by side. A shard is an open-addressing table probed linearly from
// the identity's high bits: an identity is a hash already, so one multiply spreads it, and a claim is one
// walk along one probe sequence that finds the identity, or the slot a new one takes (usually within
// one cache line), where a Go map would hash the key again and look it up twice, once to find and
// once to insert. An identity W has passed stays in its slot, treated as absent, until a new identity
// takes the slot or a rebuild of the table (when it fills, on Forget, or when the set is full) drops
// it; a rebuild sizes the table to twice the identities still live or more, so that the table does not
// grow with identities long forgotten. A caller that knows the identities it will claim next has
// their slots prefetched (Prefetch), so that a claim does not wait for memory. The package has no
// collector imports.
package dedup

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ID is a record's identity: a 128-bit hash of what identifies it.
type ID struct{ Hi, Lo uint64 }

// Claim is what Set.Claim made of an identity.
type Claim uint8

const (
	// Remembered: not seen before (or seen and forgotten); remembered from now until its expiry.
	Remembered Claim = iota
	// Duplicate: seen before, and still remembered: the record is a copy.
	Duplicate
	// Passed: not seen before, and not remembered, as W has passed its expiry already: the record
	// is expired, and a copy of it will be too.
	Passed
	// Overflow: not seen before, and not remembered: the set holds its maximum of identities.
	Overflow
)

// numShards is the number of shards: a power of two, so that an identity's shard is a mask of it.
const numShards = 64

// Set is a bounded set of identities, each with its expiry.
type Set struct {
	max int64
	// held is the number of identities held, those W has passed that no rebuild has dropped yet
	// included.
	held atomic.Int64
	// step is the least advance of W between two rebuilds of a shard, by Forget or by a claim that
	// finds the set full: the window's slide, at whose ends identities expire together.
	step   int64
	shards [numShards]shard
}

type shard struct {
	mu sync.Mutex
	// slots is the table: a power of two of slots, or none yet.
	slots []slot
	// used is the slots not empty: identities held and released ones.
	used int
	// shift takes an identity's home slot from the top bits of a multiplicative hash of its high
	// half (see home).
	shift uint8
	// sweptAt is the W of the shard's last rebuild.
	sweptAt int64
	// table is slots and shift as last set, for Prefetch, which takes no lock.
	table atomic.Pointer[table]
}

// table is a shard's slots with their shift, published together.
type table struct {
	slots []slot
	shift uint8
}

// slot is an identity with its expiry: the W at which it is forgotten. A record's expiry is after its
// time, which is after 0, so 0 marks an empty slot and -1 one whose identity was released.
type slot struct {
	id     ID
	expiry int64
}

const (
	empty    = 0
	released = -1
	// minSlots is a table's least size.
	minSlots = 16
)

// New returns a set that holds at most maxIDs identities. step is the least change of W that
// forgets any (the window's slide: identities expire together, at window ends). Forget and a full
// set rebuild a shard once W has moved by step since its last rebuild, so that the identities held
// are at most those of one step more than the live ones.
func New(maxIDs int, step int64) *Set {
	s := &Set{max: int64(maxIDs), step: max(step, 1)}
	for i := range s.shards {
		s.shards[i].sweptAt = minTime
	}
	return s
}

const minTime = -1 << 63

func (s *Set) shard(id ID) *shard { return &s.shards[id.Lo&(numShards-1)] }

// Claim looks id up at watermark w and remembers it, until W reaches expiry (> 0), if it is new: it
// returns Duplicate for an identity held whose expiry W has not reached, Passed for a new identity
// whose expiry W has reached (not remembered), Overflow for a new identity the set has no room for,
// and Remembered otherwise. An identity claimed Remembered whose record turns out not to be
// aggregated is to be Released.
func (s *Set) Claim(id ID, expiry, w int64) Claim {
	w = max(w, 0) // before any W (math.MinInt64): no identity has expired, and no slot is free
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.slots) == 0 {
		sh.setSlots(make([]slot, minSlots))
	}
	mask := uint64(len(sh.slots) - 1)
	free := -1 // the first slot on the way that a new identity may take: released, or passed by W
	i := sh.home(id)
	for {
		sl := &sh.slots[i]
		if sl.expiry == empty {
			break
		}
		if sl.id == id && sl.expiry != released {
			switch {
			case sl.expiry > w:
				return Duplicate
			case expiry <= w:
				return Passed // it stays, forgotten, until its slot is taken or dropped
			}
			sl.expiry = expiry // held, but W had passed it: remembered anew, in its place
			return Remembered
		}
		if free < 0 && (sl.expiry == released || sl.expiry <= w) {
			free = int(i)
		}
		i = (i + 1) & mask
	}
	if expiry <= w {
		return Passed
	}
	if free >= 0 && sh.slots[free].expiry != released {
		sh.slots[free] = slot{id, expiry} // in place of one W has passed: as many held as before
		return Remembered
	}
	rebuilt := false
	if !s.reserve() {
		if !due(sh.sweptAt, w, s.step) || s.rebuild(sh, w) == 0 || !s.reserve() {
			return Overflow
		}
		rebuilt = true
	}
	switch {
	case rebuilt: // the table has changed
		sh.insert(id, expiry)
	case free >= 0:
		sh.slots[free] = slot{id, expiry}
	case (sh.used+1)*8 > len(sh.slots)*7:
		s.rebuild(sh, w)
		sh.insert(id, expiry)
	default:
		sh.slots[i] = slot{id, expiry}
		sh.used++
	}
	return Remembered
}

// PrefetchAhead is how many identities ahead of its claims a caller is to Prefetch: enough for
// the processor to fetch several slots side by side, few enough that they are still in its nearest
// caches when the claims read them.
const PrefetchAhead = 8

// Prefetch asks the processor to fetch the home slot of each of ids, to be claimed soon, and returns
// at once. It takes no lock and reads nothing (see prefetch): a set of many identities is far larger
// than the processor's caches and its slots are read at random, so that a claim's read would wait
// for memory, and the shard's lock that each claim takes would keep the next claim's read from
// starting sooner. Prefetched together, the slots' fetches overlap.
func (s *Set) Prefetch(ids []ID) {
	for _, id := range ids {
		if t := s.shard(id).table.Load(); t != nil {
			prefetch(unsafe.Pointer(&t.slots[home(id, t.shift)]))
		}
	}
}

// home is the slot where id's probe sequence starts. The identity is a hash, but a multiplicative
// hash of it spreads identities whose bits are not independent (the shard is their low bits) too.
func (sh *shard) home(id ID) uint64 { return home(id, sh.shift) }

func home(id ID, shift uint8) uint64 { return (id.Hi * 0x9e3779b97f4a7c15) >> shift }

// setSlots makes slots, a power of two long, the shard's empty table.
func (sh *shard) setSlots(slots []slot) {
	sh.slots, sh.used, sh.shift = slots, 0, uint8(64-bits.TrailingZeros(uint(len(slots))))
	sh.table.Store(&table{slots, sh.shift})
}

// insert puts an identity that the shard does not hold in its first empty slot (under the lock).
func (sh *shard) insert(id ID, expiry int64) {
	mask := uint64(len(sh.slots) - 1)
	i := sh.home(id)
	for sh.slots[i].expiry != empty {
		i = (i + 1) & mask
	}
	sh.slots[i] = slot{id, expiry}
	sh.used++
}

// Release forgets an identity that Claim remembered for a record that was not aggregated after all.
func (s *Set) Release(id ID) {
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.slots) == 0 {
		return
	}
	mask := uint64(len(sh.slots) - 1)
	for i := sh.home(id); sh.slots[i].expiry != empty; i = (i + 1) & mask {
		if sl := &sh.slots[i]; sl.id == id && sl.expiry != released {
			sl.expiry = released // the probe sequences through it go on
			s.held.Add(-1)
			return
		}
	}
}

// Forget lets go of the identities whose expiry W (w) has reached, in the shards not rebuilt since W
// advanced by a step: a shard is rebuilt at most once a slide of W, however often Forget is called.
func (s *Set) Forget(w int64) {
	w = max(w, 0)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if due(sh.sweptAt, w, s.step) {
			s.rebuild(sh, w)
		}
		sh.mu.Unlock()
	}
}

// reserve counts one identity more, if the set has room for it.
func (s *Set) reserve() bool {
	if s.held.Load() >= s.max { // full: a read, where a claim that adds and takes back is two writes
		return false
	}
	if s.held.Add(1) > s.max {
		s.held.Add(-1)
		return false
	}
	return true
}

// due reports whether W (w) has advanced by step since a shard's rebuild at sweptAt.
func due(sweptAt, w, step int64) bool { return sweptAt == minTime || w-sweptAt >= step }

// rebuild makes the shard's table anew with the identities whose expiry w (≥ 0, so that empty and
// released slots are not taken for identities) has not reached, and returns how many it dropped
// (under the shard's lock).
func (s *Set) rebuild(sh *shard, w int64) int {
	live, dropped := 0, 0
	for _, sl := range sh.slots {
		switch {
		case sl.expiry > w:
			live++
		case sl.expiry != empty && sl.expiry != released:
			dropped++
		}
	}
	sh.sweptAt = w
	s.held.Add(int64(-dropped))
	// Its size changes only when the live identities outgrow half of it, or fall below an eighth:
	// a shard whose identities hover about a power of two does not swap tables back and forth.
	size := len(sh.slots)
	if n := live + 1; 2*n > size || 8*n < size {
		size = tableSize(n)
	}
	if size != len(sh.slots) {
		old := sh.slots
		sh.setSlots(make([]slot, size))
		for _, sl := range old {
			if sl.expiry > w {
				sh.insert(sl.id, sl.expiry)
			}
		}
		return dropped
	}
	// The same size (W moves on at a steady rate): in place, the live identities set aside in a
	// pooled buffer, so that a steady stream leaves no tables behind for the collector.
	kept := keptPool.Get().(*[]slot)
	for _, sl := range sh.slots {
		if sl.expiry > w {
			*kept = append(*kept, sl)
		}
	}
	clear(sh.slots)
	sh.used = 0
	for _, sl := range *kept {
		sh.insert(sl.id, sl.expiry)
	}
	*kept = (*kept)[:0]
	keptPool.Put(kept)
	return dropped
}

var keptPool = sync.Pool{New: func() any { return new([]slot) }}

// Bytes is the most memory a set of maxIDs identities takes, when it is full: its tables (each
// sized for four standard deviations above a shard's average), the shards and the set.
func Bytes(maxIDs int) int64 {
	// A shard holds the average, give or take its binomial spread: four standard deviations more.
	mean := float64(maxIDs) / numShards
	perShard := int(math.Ceil(mean + 4*math.Sqrt(mean)))
	return int64(numShards)*int64(tableSize(perShard+1))*int64(unsafe.Sizeof(slot{})) + int64(unsafe.Sizeof(Set{}))
}

// tableSize is the size of a table for n identities: a power of two at least minSlots, at most half
// full, so that a table that fills to 7/8 doubles.
func tableSize(n int) int {
	size := minSlots
	for size < 2*n {
		size *= 2
	}
	return size
}

// Len returns the number of identities held, including those W has passed that no rebuild has let
// go yet.
func (s *Set) Len() int { return int(s.held.Load()) }

// Max returns the most identities the set holds.
func (s *Set) Max() int { return int(s.max) }
