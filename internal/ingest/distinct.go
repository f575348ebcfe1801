package ingest

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The identifiers of a record for the distinct:<key> outputs: the hash of the key's value as a
// stream's identity hashes an attribute's (identityHasher: with its type, so that the string "200" and
// the int 200 are two values; a map or a slice by its contents), 0 where the record lacks the key.
// The engine counts distinct hashes (internal/engine/hll), which must be well mixed: xxhash's are.

// distinctIDs returns the identifiers of record r, of trace id trace (zero: none), for aggregation
// a's distinct outputs (a has some), by identifier index, hashed by h into buf (which the result
// reuses).
func distinctIDs(a *Aggregation, r *Record, trace [16]byte, h *identityHasher, buf *[]uint64) []uint64 {
	ids := (*buf)[:0]
	for _, k := range a.Distinct {
		ids = append(ids, distinctID(k, r, trace, h))
	}
	*buf = ids
	return ids
}

// distinctID returns the hash of record r's value of key k, or 0 without one.
func distinctID(k KeyRef, r *Record, trace [16]byte, h *identityHasher) uint64 {
	h.begin()
	switch {
	case k.Field == FieldTraceID:
		if trace == ([16]byte{}) {
			return 0
		}
		h.buf = append(h.buf, trace[:]...)
	case k.Field >= 0:
		h.buf = append(append(h.buf, byte(pcommon.ValueTypeStr)), r.Field[k.Field]...)
	default:
		v, _, ok := r.lookup(k.Name)
		if !ok {
			return 0
		}
		h.appendValue(v)
	}
	if id := h.first(); id != 0 {
		return id
	}
	return 1 // 0 means none
}
