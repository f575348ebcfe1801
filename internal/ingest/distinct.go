package ingest

import (
	"encoding/binary"
	"math"

	"github.com/zeebo/xxh3"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The identifiers of a record for the distinct:<key> outputs: a 64-bit hash of the key's value, its
// type in it (the string "200" and the int 200 are two values), 0 where the record lacks the key.
// The engine counts distinct hashes (internal/engine/hll), which must be well mixed: xxh3's are.

// distinctIDs returns the record's identifiers for aggregation a's distinct outputs, by identifier
// index, in the run's buffer (valid until the next call); nil when a has none.
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
	buf := run.sc.idBuf[:0]
	switch {
	case k.Field == FieldTraceID:
		tid := run.rec.TraceID
		if tid == ([16]byte{}) {
			return 0
		}
		buf = append(append(buf, 't'), tid[:]...)
	case k.Field >= 0:
		buf = append(append(buf, 's'), run.r.Field[k.Field]...)
	default:
		v, _, ok := run.r.lookup(k.Name)
		if !ok {
			return 0
		}
		buf = appendTypedValue(buf, v)
	}
	run.sc.idBuf = buf
	if h := xxh3.Hash(buf); h != 0 {
		return h
	}
	return 1 // 0 means none
}

// appendTypedValue appends value v with its type: a tag byte, then its bytes (maps and slices as
// their JSON form).
func appendTypedValue(b []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return append(append(b, 's'), v.Str()...)
	case pcommon.ValueTypeInt:
		return binary.LittleEndian.AppendUint64(append(b, 'i'), uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		return binary.LittleEndian.AppendUint64(append(b, 'd'), math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return append(b, 'b', 1)
		}
		return append(b, 'b', 0)
	case pcommon.ValueTypeBytes:
		return append(append(b, 'y'), v.Bytes().AsRaw()...)
	}
	return append(append(b, 'j'), v.AsString()...)
}
