package ingest

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Stream identity: a map's pairs hash one by one into two sums (so that the order of the pairs does
// not matter), and the parts (resource, scope, metric, point) into the key.

// identity is the hash of a part of a stream's identity.
type identity [2]uint64

// hashSalt makes the second hash of the same bytes independent of the first.
const hashSalt = "wa.salt\x00"

// identityHasher hashes identities, with a buffer it reuses; child hashes the maps and slices
// nested in a value, a level down.
type identityHasher struct {
	buf   []byte
	child *identityHasher
}

// sum returns the two hashes of the buffer's bytes after the salt.
func (h *identityHasher) sum() identity {
	return identity{xxhash.Sum64(h.buf[len(hashSalt):]), xxhash.Sum64(h.buf)}
}

// first returns the first of sum's hashes alone.
func (h *identityHasher) first() uint64 { return xxhash.Sum64(h.buf[len(hashSalt):]) }

func (h *identityHasher) begin() { h.buf = append(h.buf[:0], hashSalt...) }

// hashMap returns the identity of attribute map m.
func (h *identityHasher) hashMap(m pcommon.Map) identity {
	var id identity
	for k, v := range m.All() {
		h.begin()
		h.buf = binary.AppendUvarint(h.buf, uint64(len(k)))
		h.buf = append(h.buf, k...)
		h.appendValue(v)
		p := h.sum()
		id[0] += p[0]
		id[1] += p[1]
	}
	return id
}

// appendValue appends a value with its type.
func (h *identityHasher) appendValue(v pcommon.Value) {
	h.buf = append(h.buf, byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		h.buf = append(h.buf, v.Str()...)
	case pcommon.ValueTypeInt:
		h.buf = binary.LittleEndian.AppendUint64(h.buf, uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		h.buf = binary.LittleEndian.AppendUint64(h.buf, math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			h.buf = append(h.buf, 1)
		}
	case pcommon.ValueTypeBytes:
		h.buf = append(h.buf, v.Bytes().AsRaw()...)
	case pcommon.ValueTypeMap: // by the hashes of its pairs, whatever their order
		h.buf = appendIdentity(h.buf, h.down().hashMap(v.Map()))
	case pcommon.ValueTypeSlice: // its length, and each element's hash with its type, in order
		s := v.Slice()
		h.buf = binary.AppendUvarint(h.buf, uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			h.buf = appendIdentity(h.buf, h.down().hashValue(s.At(i)))
		}
	}
}

// hashValue returns the identity of a value, with its type.
func (h *identityHasher) hashValue(v pcommon.Value) identity {
	h.begin()
	h.appendValue(v)
	return h.sum()
}

// down returns the hasher of the values nested a level below h's.
func (h *identityHasher) down() *identityHasher {
	if h.child == nil {
		h.child = &identityHasher{}
	}
	return h.child
}

// hashScope returns the identity of an instrumentation scope: its name, version and attributes.
func (h *identityHasher) hashScope(name, version string, attrs pcommon.Map) identity {
	a := h.hashMap(attrs)
	h.begin()
	h.buf = binary.AppendUvarint(h.buf, uint64(len(name)))
	h.buf = append(h.buf, name...)
	h.buf = append(h.buf, version...)
	h.buf = binary.LittleEndian.AppendUint64(h.buf, a[0])
	h.buf = binary.LittleEndian.AppendUint64(h.buf, a[1])
	return h.sum()
}

// key returns the key of the stream made of parts: resource, scope, metric name, point attributes.
func (h *identityHasher) key(parts ...identity) metricinput.Key {
	h.begin()
	for _, p := range parts {
		h.buf = binary.LittleEndian.AppendUint64(h.buf, p[0])
		h.buf = binary.LittleEndian.AppendUint64(h.buf, p[1])
	}
	return metricinput.Key(h.sum())
}

// outerIdentities are the identities of the resource and the scope of the records being read, each
// hashed once for all their records.
type outerIdentities struct {
	resID, scopeID identity
	resOK, scopeOK bool
}

// forget drops both, for another resource.
func (o *outerIdentities) forget() { o.resOK, o.scopeOK = false, false }

// forgetScope drops the scope's, for another scope.
func (o *outerIdentities) forgetScope() { o.scopeOK = false }

// resource returns the identity of the resource whose attributes are attrs.
func (o *outerIdentities) resource(h *identityHasher, attrs pcommon.Map) identity {
	if !o.resOK {
		o.resID, o.resOK = h.hashMap(attrs), true
	}
	return o.resID
}

// scope returns the identity of instrumentation scope sc.
func (o *outerIdentities) scope(h *identityHasher, sc pcommon.InstrumentationScope) identity {
	if !o.scopeOK {
		o.scopeID, o.scopeOK = h.hashScope(sc.Name(), sc.Version(), sc.Attributes()), true
	}
	return o.scopeID
}

// appendIdentity appends id's two hashes to b.
func appendIdentity(b []byte, id identity) []byte {
	b = binary.LittleEndian.AppendUint64(b, id[0])
	return binary.LittleEndian.AppendUint64(b, id[1])
}

// hashName returns the identity of a metric name.
func (h *identityHasher) hashName(name string) identity {
	h.begin()
	h.buf = append(h.buf, name...)
	return h.sum()
}
