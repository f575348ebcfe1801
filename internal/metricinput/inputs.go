// Package metricinput is what a metric data point adds to an aggregation, and what the metrics
// aggregations keep of their inputs to work it out: the kinds of point (points.go), a counter's
// increase since its stream's last point and its resets, a histogram's distribution, a cumulative one
// bucket by bucket (histograms.go), and the last point of each cumulative input stream, with the unit
// and kinds each aggregation has taken (inputs.go), bounded, forgotten and checkpointed. It reads
// pdata's points; the component computes a stream's key and stages what a point adds in the engine.
package metricinput

import (
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// Input streams: what the metrics aggregations keep of the cumulative streams whose points they
// take (a stream is one resource, scope, metric and set of point attributes): the last point, which
// the next one's increase is measured from. Each aggregation has a table of its own, bounded by
// max_input_streams, which forgets a stream once the watermark is series_expiration past its last
// point. The tables and what the aggregations learned of their inputs (unit, kind) are part of the
// checkpoint.

// Key identifies an input stream: two independent 64-bit hashes of its identity.
type Key [2]uint64

// Stream is the last point of a cumulative stream.
type Stream struct {
	Last    int64    // its Timestamp
	Start   uint64   // its StartTimestamp
	Value   float64  // a monotonic sum's value; a histogram's sum
	Count   uint64   // a histogram's count
	Bounds  uint64   // an explicit histogram's bounds, hashed
	Buckets []uint64 // an explicit histogram's bucket counts, for an aggregation with explicit buckets
	// Hist is an exponential histogram, for an aggregation that keeps a sketch
	Hist *sketch.Histogram
}

// Input is what one metrics aggregation keeps of its input.
type Input struct {
	Streams map[Key]*Stream
	// ForgottenUpTo is the latest Timestamp of a stream forgotten for want of points: a stream that
	// started at or before it may be one of them, and its first point only sets its base.
	ForgottenUpTo int64
	// unit is the unit of the first metric it took a point of: its outputs' unit; kinds are the
	// kinds of point it took (see kindBits). Both are written under metricInputs.mu and read by
	// the emitter.
	unit  atomic.Pointer[string]
	kinds atomic.Uint32
}

// The kinds of point an aggregation has taken: its sum output is monotonic while it has taken the
// increases of monotonic sums alone.
const (
	tookMonotonic uint32 = 1 << iota
	tookOther
)

// Learn records the unit and kind of a point taken.
func (p *Input) Learn(unit string, monotonic bool) {
	if p.unit.Load() == nil {
		p.setUnit(unit)
	}
	bit := tookOther
	if monotonic {
		bit = tookMonotonic
	}
	if p.kinds.Load()&bit == 0 {
		p.kinds.Or(bit)
	}
}

// setUnit stores the unit; apart from learn, so that learn's argument is not moved to the heap at
// every point.
func (p *Input) setUnit(u string) { p.unit.Store(&u) }

// OutputUnit returns the unit of the aggregation's value outputs: its input's, "" before any.
func (p *Input) OutputUnit() string {
	if u := p.unit.Load(); u != nil {
		return *u
	}
	return ""
}

// MonotonicSum reports whether the sum output is monotonic: every point taken so far was an
// increase of a monotonic sum.
func (p *Input) MonotonicSum() bool { return p.kinds.Load() == tookMonotonic }

// Inputs is the input state of every metrics aggregation of a component.
type Inputs struct {
	// Mu guards the tables while a call reads and updates them.
	Mu sync.Mutex
	// Since is when the component began watching its inputs: its first start, kept by checkpoints.
	// A stream that started Since then has been watched from its start, and its first point counts
	// whole.
	Since      int64
	ByAgg      []*Input // by aggregation index; nil for spans and logs
	maxStreams int
	// nextSweep is the watermark at which the tables are next swept of forgotten streams.
	nextSweep int64
}

// New makes the input state of the aggregations whose points are marked: those of metrics.
func New(points []bool, maxStreams int) *Inputs {
	in := &Inputs{ByAgg: make([]*Input, len(points)), maxStreams: maxStreams, nextSweep: math.MinInt64}
	for i, p := range points {
		if p {
			in.ByAgg[i] = &Input{Streams: map[Key]*Stream{}}
		}
	}
	return in
}

// Stream returns aggregation agg's Stream k, and whether it is new; nil when it is new and the table
// holds max_input_streams. Under mu.
func (in *Inputs) Stream(agg int, k Key) (st *Stream, fresh bool) {
	t := in.ByAgg[agg].Streams
	if st = t[k]; st != nil {
		return st, false
	}
	if len(t) >= in.maxStreams {
		return nil, true
	}
	st = &Stream{}
	t[k] = st
	return st, true
}

// Sweep forgets, once the watermark w has moved on by an eighth of expiration since the last Sweep,
// the streams whose last point is more than expiration behind w. Under mu.
func (in *Inputs) Sweep(w, expiration int64) {
	if w == stream.NoWatermark || w < in.nextSweep {
		return
	}
	in.nextSweep = w + max(expiration/8, 1)
	horizon := w - expiration
	for _, p := range in.ByAgg {
		if p == nil {
			continue
		}
		for k, st := range p.Streams {
			if st.Last < horizon {
				p.ForgottenUpTo = max(p.ForgottenUpTo, st.Last)
				delete(p.Streams, k)
			}
		}
	}
}

// Held returns the number of input Held aggregation agg holds.
func (in *Inputs) Held(agg int) int {
	in.Mu.Lock()
	defer in.Mu.Unlock()
	return len(in.ByAgg[agg].Streams)
}

// The checkpoint's part for the metric inputs: since, then per metrics aggregation (in the order of
// the aggregations) its unit, kinds, forgottenUpTo and streams.

// AppendTo appends the input state to b. Under gate (write) and mu.
func (in *Inputs) AppendTo(b []byte) []byte {
	b = binary.AppendVarint(b, in.Since)
	for _, p := range in.ByAgg {
		if p == nil {
			continue
		}
		u := p.OutputUnit()
		b = binary.AppendUvarint(b, uint64(len(u)))
		b = append(b, u...)
		b = binary.AppendUvarint(b, uint64(p.kinds.Load()))
		b = binary.AppendVarint(b, p.ForgottenUpTo)
		b = binary.AppendUvarint(b, uint64(len(p.Streams)))
		for k, st := range p.Streams {
			b = binary.LittleEndian.AppendUint64(b, k[0])
			b = binary.LittleEndian.AppendUint64(b, k[1])
			b = binary.AppendVarint(b, st.Last)
			b = binary.AppendUvarint(b, st.Start)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(st.Value))
			b = binary.AppendUvarint(b, st.Count)
			b = binary.LittleEndian.AppendUint64(b, st.Bounds)
			b = binary.AppendUvarint(b, uint64(len(st.Buckets)))
			for _, c := range st.Buckets {
				b = binary.AppendUvarint(b, c)
			}
			if st.Hist == nil {
				b = append(b, 0)
				continue
			}
			b = append(b, 1)
			b = st.Hist.AppendBinary(b)
		}
	}
	return b
}

var errInputsCorrupt = errors.New("checkpoint: metric input streams are truncated or corrupt")

// inputsDecoder reads the checkpoint's part for the metric inputs.
type inputsDecoder struct {
	b   []byte
	err error
}

func (d *inputsDecoder) uvarint() uint64 { return readVarint(d, binary.Uvarint) }
func (d *inputsDecoder) varint() int64   { return readVarint(d, binary.Varint) }

// readVarint reads a varint with read (binary.Uvarint or binary.Varint); 0, and d failed, if it
// cannot.
func readVarint[T uint64 | int64](d *inputsDecoder, read func([]byte) (T, int)) T {
	v, n := read(d.b)
	if n <= 0 {
		d.err = errInputsCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *inputsDecoder) fixed() uint64 {
	if len(d.b) < 8 {
		d.err = errInputsCorrupt
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// count reads a length, of items of at least min bytes each: no more than the bytes left hold.
func (d *inputsDecoder) count(minBytes int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minBytes) {
		d.err = errInputsCorrupt
		return 0
	}
	return int(n)
}

// Decode reads what appendTo wrote into b, and returns what puts it in place of the input state (so
// that a checkpoint is restored whole or not at all).
func (in *Inputs) Decode(b []byte) (restore func(), err error) {
	d := &inputsDecoder{b: b}
	since := d.varint()
	type restored struct {
		unit          string
		hasUnit       bool
		kinds         uint32
		forgottenUpTo int64
		streams       map[Key]*Stream
	}
	var all []restored
	for _, p := range in.ByAgg {
		if p == nil {
			continue
		}
		var r restored
		n := d.count(1)
		if d.err != nil {
			return nil, d.err
		}
		r.unit, r.hasUnit = string(d.b[:n]), n > 0
		d.b = d.b[n:]
		r.kinds = uint32(d.uvarint())
		r.forgottenUpTo = d.varint()
		ns := d.count(16)
		r.streams = make(map[Key]*Stream, ns)
		for range ns {
			if d.err != nil {
				return nil, d.err
			}
			k := Key{d.fixed(), d.fixed()}
			st := &Stream{Last: d.varint(), Start: d.uvarint(), Value: math.Float64frombits(d.fixed()), Count: d.uvarint(), Bounds: d.fixed()}
			if nb := d.count(1); nb > 0 {
				st.Buckets = make([]uint64, nb)
				for i := range st.Buckets {
					st.Buckets[i] = d.uvarint()
				}
			}
			if d.err != nil || len(d.b) == 0 {
				return nil, errInputsCorrupt
			}
			hasHist := d.b[0]
			d.b = d.b[1:]
			switch hasHist {
			case 0:
			case 1:
				st.Hist = new(sketch.Histogram)
				n, err := st.Hist.UnmarshalBinary(d.b)
				if err != nil {
					return nil, errors.Join(errInputsCorrupt, err)
				}
				d.b = d.b[n:]
			default:
				return nil, errInputsCorrupt
			}
			r.streams[k] = st
		}
		all = append(all, r)
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errInputsCorrupt
	}
	return func() {
		in.Mu.Lock()
		defer in.Mu.Unlock()
		in.Since = since
		i := 0
		for _, p := range in.ByAgg {
			if p == nil {
				continue
			}
			r := all[i]
			i++
			p.Streams, p.ForgottenUpTo = r.streams, r.forgottenUpTo
			if r.hasUnit {
				p.unit.Store(&r.unit)
			}
			p.kinds.Store(r.kinds)
		}
	}, nil
}
