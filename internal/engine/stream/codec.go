package stream

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
)

// encoder and decoder are the snapshot's primitive encodings: varints, float bits and byte strings.
type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) float(v float64)  { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *encoder) bytes(v string) {
	e.uvarint(uint64(len(v)))
	e.b = append(e.b, v...)
}

var errCorrupt = errors.New("snapshot is truncated or corrupt")

// decoder reads what encoder wrote; after the first error every read returns a zero value and err
// stays set.
type decoder struct {
	b   []byte
	err error
	// exemplars is the scratch reservoir that decodeExemplars reads each reservoir into.
	exemplars *exemplar.Reservoir
	// old: the snapshot is of the version before accumulators (snapshotV6)
	old bool
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

// uvarint and varint return 0 when they fail, as binary.Uvarint and binary.Varint do.
func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	d.skipVarint(n)
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	d.skipVarint(n)
	return v
}

// skipVarint consumes the n bytes a varint took, as binary.Uvarint or binary.Varint returned n; n <= 0
// (too few bytes, or more than 64 bits) fails d.
func (d *decoder) skipVarint(n int) {
	if n <= 0 {
		d.fail()
		return
	}
	d.b = d.b[n:]
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *decoder) bool() bool {
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail()
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// bytes reads a length-prefixed string, copied out of the snapshot.
func (d *decoder) bytes() string { return string(d.raw()) }

// raw reads a length-prefixed string as the snapshot's own bytes, for a caller that copies them.
func (d *decoder) raw() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// count reads a length that must fit in the bytes left, each element taking at least min bytes.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail()
		return 0
	}
	return int(n)
}

// index reads a number below limit.
func (d *decoder) index(limit int) int {
	n := d.uvarint()
	if n >= uint64(limit) {
		d.fail()
		return 0
	}
	return int(n)
}
