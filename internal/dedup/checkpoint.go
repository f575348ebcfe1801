package dedup

import (
	"encoding/binary"
	"errors"
)

// The set's part of a checkpoint: the watermark w it was taken at (a varint), the number of groups
// (a uvarint), then per group the number of its identities (a uvarint) and each identity: Hi and Lo
// (8 bytes each, little-endian) and its expiry after w (a uvarint). Only identities whose expiry w
// has not reached are written. A group is a shard as the set was split when it was written; a
// restore splits them again.

// AppendTo appends the identities whose expiry w has not reached to b. The caller makes sure that
// no claim runs meanwhile (a claim in flight would have its identity written without its record).
func (s *Set) AppendTo(b []byte, w int64) []byte {
	w = max(w, 0) // before any W: every identity held (none has an expiry at or below 0)
	b = binary.AppendVarint(b, w)
	b = binary.AppendUvarint(b, numShards)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n := 0
		for _, sl := range sh.slots {
			if sl.expiry > w {
				n++
			}
		}
		b = binary.AppendUvarint(b, uint64(n))
		for _, sl := range sh.slots {
			if sl.expiry > w {
				b = binary.LittleEndian.AppendUint64(b, sl.id.Hi)
				b = binary.LittleEndian.AppendUint64(b, sl.id.Lo)
				b = binary.AppendUvarint(b, uint64(sl.expiry)-uint64(w))
			}
		}
		sh.mu.Unlock()
	}
	return b
}

// errDamaged is the error of a part that cannot be read.
var errDamaged = errors.New("remembered identities: truncated or corrupt")

// minEntryBytes is the least an identity takes in the checkpoint: its 16 bytes and a one-byte expiry.
const minEntryBytes = 17

// Decode reads a part that AppendTo wrote, and returns the function that puts its identities in the
// set, in place of those it holds; nothing changes until it is called. Identities past the set's
// maximum (a checkpoint of a set configured larger) are left out, and dropped counts them.
func (s *Set) Decode(b []byte) (restore func(), dropped int, err error) {
	w, n := binary.Varint(b)
	if n <= 0 {
		return nil, 0, errDamaged
	}
	b = b[n:]
	groups, n := binary.Uvarint(b)
	if n <= 0 || groups > uint64(len(b)) {
		return nil, 0, errDamaged
	}
	b = b[n:]
	var ids [numShards]map[ID]int64
	for i := range ids {
		ids[i] = map[ID]int64{}
	}
	held := int64(0)
	for range groups {
		count, n := binary.Uvarint(b)
		if n <= 0 || count > uint64(len(b)-n)/minEntryBytes {
			return nil, 0, errDamaged
		}
		b = b[n:]
		for range count {
			if len(b) < minEntryBytes {
				return nil, 0, errDamaged
			}
			id := ID{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
			after, n := binary.Uvarint(b[16:])
			if n <= 0 || after == 0 {
				return nil, 0, errDamaged
			}
			b = b[16+n:]
			if held == s.max {
				dropped++
				continue
			}
			m := ids[id.Lo&(numShards-1)]
			if _, dup := m[id]; dup {
				return nil, 0, errDamaged
			}
			expiry := int64(uint64(w) + after)
			if expiry <= 0 { // a record's expiry is after its time, which is after 0
				return nil, 0, errDamaged
			}
			m[id] = expiry
			held++
		}
	}
	if len(b) != 0 {
		return nil, 0, errDamaged
	}
	return func() {
		for i := range s.shards {
			sh := &s.shards[i]
			slots := make([]slot, tableSize(len(ids[i])+1))
			sh.mu.Lock()
			sh.setSlots(slots)
			sh.sweptAt = minTime
			for id, expiry := range ids[i] {
				sh.insert(id, expiry)
			}
			sh.mu.Unlock()
		}
		s.held.Store(held)
	}, dropped, nil
}
