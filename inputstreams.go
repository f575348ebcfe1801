package windowaggregator

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

// streamKey identifies an input stream: two independent 64-bit hashes of its identity.
type streamKey [2]uint64

// inputStream is the last point of a cumulative stream.
type inputStream struct {
	last    int64    // its Timestamp
	start   uint64   // its StartTimestamp
	value   float64  // a monotonic sum's value; a histogram's sum
	count   uint64   // a histogram's count
	bounds  uint64   // an explicit histogram's bounds, hashed (see hashBounds)
	buckets []uint64 // an explicit histogram's bucket counts, for an aggregation with explicit buckets
	// hist is an exponential histogram, for an aggregation that keeps a sketch
	hist *sketch.Histogram
}

// pointInput is what one metrics aggregation keeps of its input.
type pointInput struct {
	streams map[streamKey]*inputStream
	// forgottenUpTo is the latest Timestamp of a stream forgotten for want of points: a stream that
	// started at or before it may be one of them, and its first point only sets its base.
	forgottenUpTo int64
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

// learn records the unit and kind of a point taken.
func (p *pointInput) learn(unit string, monotonic bool) {
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
func (p *pointInput) setUnit(u string) { p.unit.Store(&u) }

// outputUnit returns the unit of the aggregation's value outputs: its input's, "" before any.
func (p *pointInput) outputUnit() string {
	if u := p.unit.Load(); u != nil {
		return *u
	}
	return ""
}

// monotonicSum reports whether the sum output is monotonic: every point taken so far was an
// increase of a monotonic sum.
func (p *pointInput) monotonicSum() bool { return p.kinds.Load() == tookMonotonic }

// metricInputs is the input state of every metrics aggregation of a component.
type metricInputs struct {
	// mu guards the tables while a call reads and updates them.
	mu sync.Mutex
	// since is when the component began watching its inputs: its first start, kept by checkpoints.
	// A stream that started since then has been watched from its start, and its first point counts
	// whole.
	since      int64
	byAgg      []*pointInput // by aggregation index; nil for spans and logs
	maxStreams int
	// nextSweep is the watermark at which the tables are next swept of forgotten streams.
	nextSweep int64
}

// newMetricInputs makes the input state of the aggregations whose points are marked: those of metrics.
func newMetricInputs(points []bool, maxStreams int) *metricInputs {
	in := &metricInputs{byAgg: make([]*pointInput, len(points)), maxStreams: maxStreams, nextSweep: math.MinInt64}
	for i, p := range points {
		if p {
			in.byAgg[i] = &pointInput{streams: map[streamKey]*inputStream{}}
		}
	}
	return in
}

// stream returns aggregation agg's stream k, and whether it is new; nil when it is new and the table
// holds max_input_streams. Under mu.
func (in *metricInputs) stream(agg int, k streamKey) (st *inputStream, fresh bool) {
	t := in.byAgg[agg].streams
	if st = t[k]; st != nil {
		return st, false
	}
	if len(t) >= in.maxStreams {
		return nil, true
	}
	st = &inputStream{}
	t[k] = st
	return st, true
}

// sweep forgets, once the watermark w has moved on by an eighth of expiration since the last sweep,
// the streams whose last point is more than expiration behind w. Under mu.
func (in *metricInputs) sweep(w, expiration int64) {
	if w == stream.NoWatermark || w < in.nextSweep {
		return
	}
	in.nextSweep = w + max(expiration/8, 1)
	horizon := w - expiration
	for _, p := range in.byAgg {
		if p == nil {
			continue
		}
		for k, st := range p.streams {
			if st.last < horizon {
				p.forgottenUpTo = max(p.forgottenUpTo, st.last)
				delete(p.streams, k)
			}
		}
	}
}

// streams returns the number of input streams aggregation agg holds.
func (in *metricInputs) streams(agg int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.byAgg[agg].streams)
}

// The checkpoint's part for the metric inputs: since, then per metrics aggregation (in the order of
// the aggregations) its unit, kinds, forgottenUpTo and streams.

// appendTo appends the input state to b. Under gate (write) and mu.
func (in *metricInputs) appendTo(b []byte) []byte {
	b = binary.AppendVarint(b, in.since)
	for _, p := range in.byAgg {
		if p == nil {
			continue
		}
		u := p.outputUnit()
		b = binary.AppendUvarint(b, uint64(len(u)))
		b = append(b, u...)
		b = binary.AppendUvarint(b, uint64(p.kinds.Load()))
		b = binary.AppendVarint(b, p.forgottenUpTo)
		b = binary.AppendUvarint(b, uint64(len(p.streams)))
		for k, st := range p.streams {
			b = binary.LittleEndian.AppendUint64(b, k[0])
			b = binary.LittleEndian.AppendUint64(b, k[1])
			b = binary.AppendVarint(b, st.last)
			b = binary.AppendUvarint(b, st.start)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(st.value))
			b = binary.AppendUvarint(b, st.count)
			b = binary.LittleEndian.AppendUint64(b, st.bounds)
			b = binary.AppendUvarint(b, uint64(len(st.buckets)))
			for _, c := range st.buckets {
				b = binary.AppendUvarint(b, c)
			}
			if st.hist == nil {
				b = append(b, 0)
				continue
			}
			b = append(b, 1)
			b = st.hist.AppendBinary(b)
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

// decode reads what appendTo wrote into b, and returns what puts it in place of the input state (so
// that a checkpoint is restored whole or not at all).
func (in *metricInputs) decode(b []byte) (restore func(), err error) {
	d := &inputsDecoder{b: b}
	since := d.varint()
	type restored struct {
		unit          string
		hasUnit       bool
		kinds         uint32
		forgottenUpTo int64
		streams       map[streamKey]*inputStream
	}
	var all []restored
	for _, p := range in.byAgg {
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
		r.streams = make(map[streamKey]*inputStream, ns)
		for range ns {
			if d.err != nil {
				return nil, d.err
			}
			k := streamKey{d.fixed(), d.fixed()}
			st := &inputStream{last: d.varint(), start: d.uvarint(), value: math.Float64frombits(d.fixed()), count: d.uvarint(), bounds: d.fixed()}
			if nb := d.count(1); nb > 0 {
				st.buckets = make([]uint64, nb)
				for i := range st.buckets {
					st.buckets[i] = d.uvarint()
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
				st.hist = new(sketch.Histogram)
				n, err := st.hist.UnmarshalBinary(d.b)
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
		in.mu.Lock()
		defer in.mu.Unlock()
		in.since = since
		i := 0
		for _, p := range in.byAgg {
			if p == nil {
				continue
			}
			r := all[i]
			i++
			p.streams, p.forgottenUpTo = r.streams, r.forgottenUpTo
			if r.hasUnit {
				p.unit.Store(&r.unit)
			}
			p.kinds.Store(r.kinds)
		}
	}, nil
}
