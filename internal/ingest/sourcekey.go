package ingest

import (
	"encoding/binary"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// A source key names a source of records for the engine's per-source watermark: the values of the
// watermark.per_source keys on the records' resource, in the keys' order, each its length first (a
// missing key counts as empty). Ingest writes it, the operator's view reads it back.

// appendSourceKey appends the source key of resource, by keys, to b.
func appendSourceKey(b []byte, resource pcommon.Map, keys []string) []byte {
	for _, key := range keys {
		var v string
		if val, ok := resource.Get(key); ok {
			v = val.AsString()
		}
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

// DecodeSourceKey reads a source key back as its values by key; a damaged key gives the values read
// before the damage.
func DecodeSourceKey(keys []string, b []byte) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		n, m := binary.Uvarint(b)
		if m <= 0 || uint64(len(b)-m) < n {
			return out
		}
		out[k] = string(b[m : m+int(n)])
		b = b[m+int(n):]
	}
	return out
}
