package dedup

import (
	"encoding/binary"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// The identities of records, each a 64-bit hash. Trace and span ids are random already: folding them
// into 64 bits takes two multiplies (the 128-bit products' halves xored, as wyhash mixes), where a
// general hash of their 28 bytes would read them again. The identities of records that are not random
// (a metric point's stream with its times, a log record's parts) are xxh3 hashes, or mixes of them.

// Seeds of the mix: odd constants with bits spread (wyhash's).
const (
	seed0 = 0xa0761d6478bd642f
	seed1 = 0xe7037ed1a0b428db
	seed2 = 0x8ebc6af09c88c6e3
	seed3 = 0x589965cc75374cc3
)

// mix is the 128-bit product of x and y, its halves xored.
func mix(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

// Span is the identity of a span: its trace id, span id and kind (Zipkin's clients and servers share
// a span id, and the kind tells them apart).
func Span(trace [16]byte, span [8]byte, kind int32) ID {
	a, b := binary.LittleEndian.Uint64(trace[:8]), binary.LittleEndian.Uint64(trace[8:])
	c := binary.LittleEndian.Uint64(span[:])
	return Fold(mix(mix(a^seed0, b^seed1)^c^seed2, uint64(uint32(kind))^seed3))
}

// Point is the identity of a metric point: the two 64-bit hashes of its input stream, a hash of what
// else identifies it (its metric's type and unit, how it is taken), its start time and its time.
func Point(stream [2]uint64, kind uint64, start, t uint64) ID {
	h := mix(stream[0]^seed0, stream[1]^seed1)
	h = mix(h^kind^seed2, start^seed3)
	return Fold(mix(h^seed0, t^seed1))
}

// Hash is the identity of a record whose identifying parts b holds, each with its type and length.
func Hash(b []byte) ID { return Fold(xxh3.Hash(b)) }
