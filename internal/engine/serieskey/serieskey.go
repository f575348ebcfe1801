// Package serieskey encodes the group-by values of a record into a compact byte key, and decodes a key
// back into the values, with their types and where they were found. The engine treats keys as opaque;
// the component builds them on the hot path (allocation-free, into a reused buffer) and decodes them
// only when a window fires.
//
// Encoding: one entry per group-by key, in group-by order: a tag byte (kind in the low 4 bits, source
// in the next 2), then the value: strings and bytes as uvarint length + bytes, ints as varint, doubles
// as 8 little-endian bytes, bools as one byte, absent values as the tag alone.
package serieskey

import (
	"encoding/binary"
	"errors"
	"math"
)

// Kind is the type of a group-by value; the zero Kind is that of a value Builder.Absent appended.
type Kind uint8

const (
	absent Kind = iota // the record has no such key
	Str
	Int
	Double
	Bool
	Bytes
)

// Source says where a value was found.
type Source uint8

const (
	Record Source = iota
	Scope
	Resource
)

// Builder appends entries to a key. The zero value is ready to use.
type Builder struct {
	buf []byte
}

// Reset empties the key, keeping its storage.
func (b *Builder) Reset() { b.buf = b.buf[:0] }

// Key returns the key built so far; it is valid until the next Reset.
func (b *Builder) Key() []byte { return b.buf }

func (b *Builder) tag(k Kind, s Source) { b.buf = append(b.buf, byte(k)|byte(s)<<4) }

// Absent appends a missing value.
func (b *Builder) Absent() { b.tag(absent, Record) }

// Str appends a string value.
func (b *Builder) Str(s Source, v string) {
	b.tag(Str, s)
	if len(v) < 0x80 { // the common case: a one-byte length
		b.buf = append(b.buf, byte(len(v)))
	} else {
		b.buf = binary.AppendUvarint(b.buf, uint64(len(v)))
	}
	b.buf = append(b.buf, v...)
}

// Bytes appends a byte-string value.
func (b *Builder) Bytes(s Source, v []byte) {
	b.tag(Bytes, s)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(v)))
	b.buf = append(b.buf, v...)
}

// Int appends an integer value.
func (b *Builder) Int(s Source, v int64) {
	b.tag(Int, s)
	b.buf = binary.AppendVarint(b.buf, v)
}

// Double appends a floating-point value.
func (b *Builder) Double(s Source, v float64) {
	b.tag(Double, s)
	b.buf = binary.LittleEndian.AppendUint64(b.buf, math.Float64bits(v))
}

// Bool appends a boolean value.
func (b *Builder) Bool(s Source, v bool) {
	b.tag(Bool, s)
	if v {
		b.buf = append(b.buf, 1)
	} else {
		b.buf = append(b.buf, 0)
	}
}

// Value is one decoded group-by value.
type Value struct {
	Kind   Kind
	Source Source
	Str    string // Str and Bytes
	Int    int64
	Double float64
	Bool   bool
}

// errCorrupt is returned for a key that this package did not write.
var errCorrupt = errors.New("serieskey: corrupt key")

// Decode calls fn with the position and value of every entry of key.
func Decode(key string, fn func(i int, v Value)) error {
	for i := 0; len(key) > 0; i++ {
		t := key[0]
		key = key[1:]
		v := Value{Kind: Kind(t & 0x0f), Source: Source(t >> 4)}
		if v.Source > Resource {
			return errCorrupt
		}
		switch v.Kind {
		case absent:
			if v.Source != Record { // Builder.Absent writes no source
				return errCorrupt
			}
		case Str, Bytes:
			n, w := binary.Uvarint([]byte(key[:min(len(key), binary.MaxVarintLen64)]))
			if w <= 0 || n > uint64(len(key)-w) {
				return errCorrupt
			}
			v.Str = key[w : w+int(n)]
			key = key[w+int(n):]
		case Int:
			n, w := binary.Varint([]byte(key[:min(len(key), binary.MaxVarintLen64)]))
			if w <= 0 {
				return errCorrupt
			}
			v.Int = n
			key = key[w:]
		case Double:
			if len(key) < 8 {
				return errCorrupt
			}
			v.Double = math.Float64frombits(binary.LittleEndian.Uint64([]byte(key[:8])))
			key = key[8:]
		case Bool:
			if len(key) < 1 || key[0] > 1 {
				return errCorrupt
			}
			v.Bool = key[0] == 1
			key = key[1:]
		default:
			return errCorrupt
		}
		fn(i, v)
	}
	return nil
}
