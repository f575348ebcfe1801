package ingest

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The identifiers of a record for the distinct:<key> outputs: the hash of the key's value as a
// stream's identity hashes an attribute's (identityHasher: with its type, so that the string "200" and
// the int 200 are two values; a map or a slice by its contents), 0 where the record lacks the key.
// The engine counts distinct hashes (internal/engine/hll), which must be well mixed: xxhash's are.

// distinctIDs returns the record's identifiers for aggregation a's distinct outputs, by identifier
// index, in the call's buffer (valid until the next call); nil when a has none.
func (run *ingestRun) distinctIDs(a *Aggregation) []uint64 {
	if len(a.Distinct) == 0 {
		return nil
	}
	ids := run.sc.ids[:0]
	for _, k := range a.Distinct {
		ids = append(ids, run.distinctID(k))
	}
	run.sc.ids = ids
	return ids
}

// distinctID returns the hash of the record's value of key k, or 0 without one.
func (run *ingestRun) distinctID(k KeyRef) uint64 {
	h := &run.sc.idHasher
	h.begin()
	switch {
	case k.Field == FieldTraceID:
		tid := run.rec.TraceID
		if tid == ([16]byte{}) {
			return 0
		}
		h.buf = append(h.buf, tid[:]...)
	case k.Field >= 0:
		h.buf = append(append(h.buf, byte(pcommon.ValueTypeStr)), run.r.Field[k.Field]...)
	default:
		v, _, ok := run.r.lookup(k.Name)
		if !ok {
			return 0
		}
		h.appendValue(v)
	}
	if id := h.sum()[0]; id != 0 {
		return id
	}
	return 1 // 0 means none
}
