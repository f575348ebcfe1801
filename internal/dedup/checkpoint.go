package dedup

import (
	"cmp"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
)

// The set's part of a checkpoint is written a slice at a time: each slice whose identities changed
// since the last checkpoint is a part of its own, under a key of its own, and the checkpoint itself
// holds only the directory of the parts that make up the set. So a checkpoint writes the identities
// remembered since the previous one (and the rest of the slices they went to), not every identity,
// and the ingest gate is held only to mark which slices those are.
//
// A part: its slice's index (a varint), the slice's expiry (a varint), the number of its identities
// (a uvarint), and each identity (8 bytes, little-endian). The directory: the slice width (a
// uvarint), the number of parts (a uvarint), and for each part its index (a varint), its number of
// identities (a uvarint) and the CRC-32C of its bytes (4 bytes, little-endian), so that a part that
// is damaged, missing or of another checkpoint is detected.

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Part is one slice's part of a checkpoint.
type Part struct {
	Index int64
	Data  []byte
	CRC   uint32
	n     int
}

// Mark is a checkpoint of the set being taken: the slices to write, marked while no claim ran.
type Mark struct {
	s     *Set
	width int64
	// write are the slices that changed since the last checkpoint; live every slice W has not passed,
	// by index
	write   []*slice
	live    []*slice
	parts   []Part
	encoded bool
	// stale are the parts the storage holds that this checkpoint no longer lists
	stale []int64
}

// Mark begins a checkpoint at watermark w. The caller makes sure that no claim runs meanwhile (a
// claim in flight would have its identity written without its record): the identities claimed
// after Mark returns are left out of the parts that Parts encodes.
func (s *Set) Mark(w int64) *Mark {
	s.Forget(w)
	m := &Mark{s: s, width: int64(1) << s.shift}
	s.mu.RLock()
	for _, sl := range s.slices {
		sl.mu.Lock()
		m.live = append(m.live, sl)
		if sl.dirty || !sl.saved.ok {
			sl.dirty, sl.marked, sl.after = false, true, sl.after[:0]
			m.write = append(m.write, sl)
		}
		sl.mu.Unlock()
	}
	for idx := range s.stored {
		if _, ok := s.slices[idx]; !ok {
			m.stale = append(m.stale, idx)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(m.live, func(a, b *slice) int { return cmp.Compare(a.index, b.index) })
	slices.Sort(m.stale)
	return m
}

// Parts encodes the slices that changed since the last checkpoint, each under its own lock (claims
// of the other slices go on meanwhile), without the identities claimed since Mark.
func (m *Mark) Parts() []Part {
	if m.encoded {
		return m.parts
	}
	m.encoded = true
	for _, sl := range m.write {
		sl.mu.Lock()
		var after map[ID]struct{}
		if len(sl.after) > 0 {
			after = make(map[ID]struct{}, len(sl.after))
			for _, id := range sl.after {
				after[id] = struct{}{}
			}
		}
		ids := make([]byte, 0, 8*sl.n)
		n := 0
		for i := range sl.buckets {
			for _, e := range sl.buckets[i] {
				if e == empty || e == released {
					continue
				}
				if _, ok := after[e]; ok {
					continue
				}
				ids = binary.LittleEndian.AppendUint64(ids, uint64(e))
				n++
			}
		}
		b := binary.AppendVarint(make([]byte, 0, 3*binary.MaxVarintLen64+len(ids)), sl.index)
		b = binary.AppendVarint(b, sl.expiry)
		b = binary.AppendUvarint(b, uint64(n))
		b = append(b, ids...)
		sl.marked, sl.after = false, nil
		sl.mu.Unlock()
		m.parts = append(m.parts, Part{Index: sl.index, Data: b, CRC: crc32.Checksum(b, crc32c), n: n})
	}
	return m.parts
}

// Directory is the checkpoint's list of the parts that make up the set: the parts Parts wrote, and
// those of the slices that did not change since they were written.
func (m *Mark) Directory() []byte {
	m.Parts()
	written := make(map[int64]Part, len(m.parts))
	for _, p := range m.parts {
		written[p.Index] = p
	}
	b := binary.AppendUvarint(nil, uint64(m.width))
	b = binary.AppendUvarint(b, uint64(len(m.live)))
	for _, sl := range m.live {
		n, crc := 0, uint32(0)
		if p, ok := written[sl.index]; ok {
			n, crc = p.n, p.CRC
		} else {
			sl.mu.Lock()
			n, crc = sl.saved.n, sl.saved.crc
			sl.mu.Unlock()
		}
		b = binary.AppendVarint(b, sl.index)
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.LittleEndian.AppendUint32(b, crc)
	}
	return b
}

// Stale returns the indexes of the parts the storage holds that the checkpoint no longer lists.
func (m *Mark) Stale() []int64 { return m.stale }

// Done ends the checkpoint: saved, the storage holds it; otherwise the slices it was to write are
// written by the next one.
func (m *Mark) Done(saved bool) {
	s := m.s
	if !saved {
		for _, sl := range m.write {
			sl.mu.Lock()
			sl.dirty = true
			sl.mu.Unlock()
		}
		return
	}
	for i, p := range m.parts { // a part a slice to write, in their order
		sl := m.write[i]
		sl.mu.Lock()
		sl.saved = savedPart{ok: true, n: p.n, crc: p.CRC}
		sl.mu.Unlock()
	}
	s.mu.Lock()
	clear(s.stored)
	for _, sl := range m.live {
		s.stored[sl.index] = struct{}{}
	}
	s.mu.Unlock()
}

// errDamaged is the error of a part or directory that cannot be read.
var errDamaged = errors.New("remembered identities: truncated, corrupt or of another checkpoint")

// Entry is a directory's entry: a part's slice index, its identities and its checksum.
type Entry struct {
	Index int64
	n     int
	crc   uint32
}

// Directory is a decoded directory.
type Directory struct {
	width   int64
	Entries []Entry
}

// DecodeDirectory reads a directory that Mark.Directory wrote.
func DecodeDirectory(b []byte) (Directory, error) {
	var d Directory
	width, n := binary.Uvarint(b)
	if n <= 0 || width == 0 || width > 1<<62 {
		return d, errDamaged
	}
	d.width = int64(width)
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b))/6 {
		return d, errDamaged
	}
	b = b[n:]
	seen := make(map[int64]bool, count)
	for range count {
		idx, n := binary.Varint(b)
		if n <= 0 {
			return d, errDamaged
		}
		b = b[n:]
		ids, n := binary.Uvarint(b)
		if n <= 0 || ids > 1<<40 || len(b) < n+4 || seen[idx] {
			return d, errDamaged
		}
		seen[idx] = true
		d.Entries = append(d.Entries, Entry{Index: idx, n: int(ids), crc: binary.LittleEndian.Uint32(b[n:])})
		b = b[n+4:]
	}
	if len(b) != 0 {
		return d, errDamaged
	}
	return d, nil
}

// Restore returns the function that puts the identities of the directory's parts (part, by index)
// in the set, in place of those it holds; nothing changes until it is called. A part that is missing,
// damaged or not the one the directory lists is an error. Identities past the set's maximum are left
// out, and dropped counts them; so are all of them, with sameWidth false, when the checkpoint was
// taken with slices of another width (another slide).
func (s *Set) Restore(d Directory, part func(idx int64) ([]byte, bool)) (restore func(), dropped int, sameWidth bool, err error) {
	type restored struct {
		sl    *slice
		ids   []ID
		entry Entry
	}
	var all []restored
	sameWidth = d.width == int64(1)<<s.shift
	held := int64(0)
	for _, e := range d.Entries {
		b, ok := part(e.Index)
		if !ok || crc32.Checksum(b, crc32c) != e.crc {
			return nil, 0, false, errDamaged
		}
		idx, n := binary.Varint(b)
		if n <= 0 || idx != e.Index {
			return nil, 0, false, errDamaged
		}
		b = b[n:]
		expiry, n := binary.Varint(b)
		if n <= 0 {
			return nil, 0, false, errDamaged
		}
		b = b[n:]
		count, n := binary.Uvarint(b)
		if n <= 0 || count != uint64(e.n) || uint64(len(b)-n) != 8*count {
			return nil, 0, false, errDamaged
		}
		b = b[n:]
		r := restored{sl: &slice{index: idx, expiry: expiry}, entry: e}
		for i := range int(count) {
			id := ID(binary.LittleEndian.Uint64(b[8*i:]))
			if id == empty || id == released {
				return nil, 0, false, errDamaged
			}
			if held == s.max || !sameWidth {
				dropped++
				continue
			}
			r.ids = append(r.ids, id)
			held++
		}
		if len(r.ids) > 0 {
			all = append(all, r)
		}
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for idx, sl := range s.slices {
			sl.mu.Lock()
			s.drop(idx, sl)
			sl.mu.Unlock()
		}
		clear(s.stored)
		s.newest, s.prevCount, s.due = minTime, 0, maxTime
		for _, r := range all {
			sl := r.sl
			sl.setTable(make([]bucket, bucketsFor(len(r.ids))))
			for _, id := range r.ids {
				sl.claim(id)
			}
			if sl.n == r.entry.n { // the part as the storage holds it: nothing was left out
				sl.saved = savedPart{ok: true, n: sl.n, crc: r.entry.crc}
				s.stored[sl.index] = struct{}{}
			}
			s.slices[sl.index] = sl
			s.due = min(s.due, sl.expiry)
			s.newest = max(s.newest, sl.index)
			s.prevCount = max(s.prevCount, sl.n)
			s.held.Add(int64(sl.n))
		}
	}, dropped, sameWidth, nil
}
