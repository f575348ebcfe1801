package stream

import (
	"errors"
	"fmt"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
)

// The snapshot format: magic, version, then the configuration it was taken under (a snapshot only
// restores into an engine with the same window geometry and aggregations), the watermark, the series
// with their panes, and the results not yet collected. Counts are weighted (see totals). Exemplars
// are not part of the configuration: a snapshot restores into an engine that keeps more, fewer or
// none, and the exemplars restored are what reservoirs of the engine's size would have kept of them.
//
// A snapshot of version 6, which is this format without accumulators, restores into an engine whose
// aggregations have none; one of another version does not restore.
const (
	snapshotMagic   = "WAGS"
	snapshotVersion = 7
	// snapshotV6 is the version before accumulators (Aggregation.Accumulators): it restores into
	// an engine whose aggregations have none.
	snapshotV6 = 6
)

// errSnapshotMismatch says that a snapshot was taken under another configuration.
var errSnapshotMismatch = errors.New("snapshot was taken with a different window or aggregation configuration")

// Snapshot appends the engine's whole state to dst, at one applied watermark W. It takes the shards
// one at a time, so that ingest waits for one shard's part of the snapshot at most: a batch that
// begins meanwhile applies at most W (see pin), each shard is brought to W under its lock and its
// series and results are encoded then, and records that come to a shard after its turn belong to the
// next snapshot. A restore re-hashes the series into shards, so their order here does not matter.
func (e *Engine) Snapshot(dst []byte) []byte {
	e.collectMu.Lock()
	defer e.collectMu.Unlock()
	// The pin first, at a W no later than the one taken: a batch that began before it applies a W
	// raised before the W taken below, so at most that; one that begins after it, at most the pin.
	// Then the watermark's state, then W: a concurrent Begin or End may raise W in between, and W
	// read second is at least the state's.
	now := e.clock.Now()
	e.pin.Store(e.wm.current(now))
	defer e.pin.Store(maxTime)
	wst := e.wm.state(now)
	w := e.wm.current(now)
	e.pin.Store(w)
	ser, res := &e.snapSeries, &e.snapResults
	ser.b, res.b = ser.b[:0], res.b[:0]
	var nSeries, nResults int
	// Backwards: a batch walks the shards forwards (from a random one), so it crosses this walk
	// rather than follow it from shard to shard.
	shards := e.allShards()
	for i := len(shards) - 1; i >= 0; i-- {
		sh := shards[i]
		sh.mu.Lock()
		sh.flush(w)
		for _, se := range sh.list {
			se.putHead(&sh.paneMaker)
			encodeSeries(ser, se)
		}
		for i := range sh.pending.items {
			encodeResult(res, &sh.pending.items[i])
		}
		nSeries += len(sh.list)
		nResults += len(sh.pending.items)
		sh.mu.Unlock()
	}
	enc := &encoder{b: append(dst, snapshotMagic...)}
	enc.uvarint(snapshotVersion)
	e.encodeConfig(enc)
	enc.bool(e.g.cumulative)
	enc.bool(e.g.fold)
	enc.varint(e.g.expiration)
	for _, a := range e.aggs {
		enc.uvarint(uint64(len(a.Bounds)))
		for _, b := range a.Bounds {
			enc.float(b)
		}
	}
	for _, a := range e.aggs {
		enc.uvarint(uint64(len(a.Accumulators)))
		for _, k := range a.Accumulators {
			enc.bytes(k.Name)
			enc.varint(int64(k.ID))
		}
	}
	enc.varint(wst.event)
	enc.varint(wst.floor)
	enc.varint(wst.high)
	enc.varint(w)
	enc.uvarint(uint64(len(wst.sources)))
	for _, src := range wst.sources {
		enc.bytes(src.key)
		enc.varint(src.maxEvent)
	}
	enc.uvarint(uint64(nSeries))
	enc.b = append(enc.b, ser.b...)
	enc.uvarint(uint64(nResults))
	enc.b = append(enc.b, res.b...)
	for _, kept := range []*encoder{ser, res} {
		if cap(kept.b) > 4*len(kept.b)+64<<10 { // after a peak of series: let the memory go
			kept.b = nil
		}
	}
	return enc.b
}

func (e *Engine) encodeConfig(enc *encoder) {
	enc.varint(e.g.size)
	enc.varint(e.g.slide)
	enc.varint(e.g.lateness)
	enc.varint(e.g.offset)
	enc.varint(e.g.early)
	enc.uvarint(uint64(len(e.aggs)))
	for _, a := range e.aggs {
		enc.bool(a.Histogram)
		enc.uvarint(uint64(len(a.Quantiles)))
		for _, q := range a.Quantiles {
			enc.float(q)
		}
	}
}

func encodeSeries(enc *encoder, se *series) {
	enc.uvarint(uint64(se.agg))
	enc.bool(se.overflow)
	enc.bytes(se.key)
	enc.uvarint(uint64(len(se.panes)))
	for i := range se.panes {
		p := &se.panes[i]
		enc.varint(p.start)
		encodeTotals(enc, &p.total)
		encodeTotals(enc, &p.delta)
		encodeSketch(enc, p.hist)
		encodeSketch(enc, p.deltaHist)
		encodeCounts(enc, p.counts)
		encodeCounts(enc, p.deltaCounts)
		enc.bool(p.ex != nil)
		if p.ex != nil {
			enc.b = p.ex.all.AppendBinary(enc.b)
			enc.b = p.ex.delta.AppendBinary(enc.b)
		}
		encodeAccumulators(enc, p.accs)
	}
	ac := se.ac
	enc.bool(ac != nil)
	if ac == nil {
		return
	}
	encodeTotals(enc, &ac.fold)
	encodeSketch(enc, ac.foldHist)
	encodeCounts(enc, ac.foldCounts)
	enc.varint(ac.foldFirst)
	encodeTotals(enc, &ac.cum)
	encodeSketch(enc, ac.cumHist)
	encodeCounts(enc, ac.cumCounts)
	enc.varint(ac.start)
	enc.varint(ac.lastEnd)
	enc.bool(ac.started)
	encodeReservoir(enc, ac.foldEx)
	es := ac.early
	enc.bool(es != nil)
	if es != nil {
		enc.varint(es.start)
		enc.varint(es.at)
		encodeTotals(enc, &es.total)
		encodeSketch(enc, es.hist)
		encodeCounts(enc, es.counts)
	}
}

func encodeResult(enc *encoder, r *Result) {
	enc.uvarint(uint64(r.Agg))
	enc.bytes(r.Key)
	enc.bool(r.Overflow)
	enc.varint(r.Start)
	enc.varint(r.End)
	enc.bool(r.late)
	enc.uvarint(r.Count)
	enc.float(r.Sum)
	enc.uvarint(r.ValueCount)
	enc.uvarint(r.WindowValueCount)
	enc.float(r.Avg)
	enc.float(r.Min)
	enc.float(r.Max)
	enc.uvarint(uint64(len(r.Quantiles)))
	for _, q := range r.Quantiles {
		enc.float(q)
	}
	encodeSketch(enc, r.Hist)
	enc.bool(r.HasWindow)
	enc.bool(r.HasPoint)
	pt := &r.Point
	enc.varint(pt.Start)
	enc.uvarint(pt.Count)
	enc.uvarint(pt.ValueCount)
	enc.float(pt.Sum)
	enc.float(pt.Min)
	enc.float(pt.Max)
	encodeSketch(enc, pt.Hist)
	encodeCounts(enc, pt.BucketCounts)
	enc.b = exemplar.AppendList(enc.b, pt.Exemplars)
	enc.bool(r.HasMaxExemplar)
	if r.HasMaxExemplar {
		enc.b = exemplar.AppendList(enc.b, []exemplar.Exemplar{r.MaxExemplar})
	}
	enc.uvarint(r.WindowCount)
	enc.float(r.WindowSum)
	enc.uvarint(uint64(len(r.Values)))
	for _, v := range r.Values {
		enc.float(v)
	}
	enc.bool(r.Early)
}

// Restore loads a snapshot into an engine that has not ingested anything. On error the engine is left
// empty and usable.
func (e *Engine) Restore(b []byte) error {
	e.collectMu.Lock()
	defer e.collectMu.Unlock()
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return errCorrupt
	}
	d := &decoder{b: b[len(snapshotMagic):]}
	version := d.uvarint()
	if d.err == nil && version != snapshotVersion && version != snapshotV6 {
		return fmt.Errorf("snapshot format version %d, this build reads versions %d and %d", version, snapshotV6, snapshotVersion)
	}
	d.old = version == snapshotV6
	if err := e.checkConfig(d); err != nil {
		return err
	}
	wst := watermarkState{event: d.varint(), floor: d.varint(), high: d.varint()}
	w := d.varint()
	inRange := func(v int64) bool { return v >= minTime && v <= maxTime }
	if d.err == nil && !(inRange(w) && inRange(wst.event) && inRange(wst.floor) && inRange(wst.high) && wst.high <= w) {
		d.fail()
	}
	nSources := d.count(2)
	for range nSources {
		src := sourceState{key: string(d.raw()), maxEvent: d.varint()}
		if d.err == nil && !inRange(src.maxEvent) {
			d.fail()
		}
		wst.sources = append(wst.sources, src)
	}
	fresh := make([]*shard, len(e.shards))
	for i := range fresh {
		fresh[i] = newShard(e.g, e.aggs, e.active)
	}
	overflow := newShard(e.g, e.aggs, e.active)
	active := make([]int64, len(e.aggs))
	nSeries := d.count(4)
	for range nSeries {
		se := e.decodeSeries(d)
		if d.err != nil {
			break
		}
		if se.overflow {
			if overflow.overflow[se.agg] != nil {
				d.fail()
				break
			}
			overflow.overflow[se.agg] = se
			overflow.adopt(se)
			continue
		}
		se.hash = e.hash(int(se.agg), []byte(se.key))
		sh := fresh[se.hash&e.mask]
		if sh.table.find(se.hash, int(se.agg), []byte(se.key)) != nil {
			d.fail()
			break
		}
		sh.table.insert(se)
		sh.adopt(se)
		active[se.agg]++
	}
	nResults := d.count(8)
	for range nResults {
		e.decodeResult(d, overflow.pending.next())
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return errCorrupt
	}
	for _, sh := range append(fresh, overflow) {
		sh.applied, sh.next = w, e.g.nextBoundary(w)
	}
	e.shards, e.overflow = fresh, overflow
	for i := range e.active {
		e.active[i].Store(active[i])
	}
	wst.high = w
	e.wm.restore(wst, e.clock.Now())
	return nil
}

// adopt takes a restored series into the shard's list.
func (s *shard) adopt(se *series) {
	se.pos = int32(len(s.list))
	s.list = append(s.list, se)
	for i := range se.panes {
		if se.panes[i].dirty() {
			s.dirty = true
		}
	}
}

func (e *Engine) checkConfig(d *decoder) error {
	size, slide, lateness := d.varint(), d.varint(), d.varint()
	var offset, early int64 // a version 6 snapshot's windows have neither
	if !d.old {
		offset, early = d.varint(), d.varint()
	}
	n := d.count(2)
	if d.err != nil {
		return d.err
	}
	if size != e.g.size || slide != e.g.slide || lateness != e.g.lateness || offset != e.g.offset || early != e.g.early || n != len(e.aggs) {
		return errSnapshotMismatch
	}
	for _, a := range e.aggs {
		hist := d.bool()
		nq := d.count(8)
		if d.err != nil {
			return d.err
		}
		if hist != a.Histogram || nq != len(a.Quantiles) {
			return errSnapshotMismatch
		}
		for _, q := range a.Quantiles {
			if d.float() != q {
				return errSnapshotMismatch
			}
		}
	}
	cumulative, fold, expiration := d.bool(), d.bool(), d.varint()
	if d.err != nil {
		return d.err
	}
	if cumulative != e.g.cumulative || fold != e.g.fold || expiration != e.g.expiration {
		return errSnapshotMismatch
	}
	for _, a := range e.aggs {
		n := d.count(8)
		if d.err != nil {
			return d.err
		}
		if n != len(a.Bounds) {
			return errSnapshotMismatch
		}
		for _, b := range a.Bounds {
			if d.float() != b {
				return errSnapshotMismatch
			}
		}
	}
	for _, a := range e.aggs {
		n := 0
		if !d.old {
			n = d.count(2)
		}
		if d.err != nil {
			return d.err
		}
		if n != len(a.Accumulators) {
			return errSnapshotMismatch
		}
		for _, k := range a.Accumulators {
			if d.bytes() != k.Name || d.varint() != int64(k.ID) {
				return errSnapshotMismatch
			}
		}
	}
	return d.err
}

func (e *Engine) decodeSeries(d *decoder) *series {
	se := &series{agg: int32(d.index(len(e.aggs)))}
	se.overflow = d.bool()
	se.setKey(d.raw()) // setKey copies
	if d.err != nil {
		return se
	}
	a := &e.aggs[se.agg]
	n := d.count(20)
	nb := a.buckets() // the bucket counts a pane or accrual may hold
	for range n {
		p := pane{start: d.varint()}
		decodeTotals(d, &p.total)
		decodeTotals(d, &p.delta)
		p.hist = decodeSketch(d, a.KeepsSketch())
		p.deltaHist = decodeSketch(d, a.Histogram && !e.g.fold)
		p.counts = decodeCounts(d, nb, a.Bounds == nil)
		p.deltaCounts = decodeCounts(d, nb, true)
		var all, delta *exemplar.Reservoir // where the saved exemplars go; nil: dropped
		if a.Exemplars > 0 {
			p.ex = newPaneExemplars(a.Exemplars)
			all, delta = &p.ex.all, &p.ex.delta
		}
		if d.bool() {
			decodeExemplars(d, all)
			decodeExemplars(d, delta)
		}
		p.accs = decodeAccumulators(d, a.Accumulators)
		if d.err != nil {
			return se
		}
		if k := len(se.panes); p.start != e.g.paneStart(p.start) || (k > 0 && se.panes[k-1].start >= p.start) {
			d.fail()
			return se
		}
		se.panes = append(se.panes, p)
	}
	if d.bool() {
		ac := &accrual{}
		decodeTotals(d, &ac.fold)
		ac.foldHist = decodeOptionalSketch(d, a.Histogram)
		ac.foldCounts = decodeCounts(d, nb, true)
		ac.foldFirst = d.varint()
		decodeTotals(d, &ac.cum)
		ac.cumHist = decodeOptionalSketch(d, a.Histogram)
		ac.cumCounts = decodeCounts(d, nb, true)
		ac.start, ac.lastEnd, ac.started = d.varint(), d.varint(), d.bool()
		if d.bool() {
			if a.Exemplars > 0 {
				ac.foldEx = exemplar.New(a.Exemplars)
			}
			decodeExemplars(d, ac.foldEx)
		}
		if !d.old && d.bool() {
			es := &earlySent{}
			ac.early = es
			es.start, es.at = d.varint(), d.varint()
			decodeTotals(d, &es.total)
			es.hist = decodeOptionalSketch(d, a.Histogram)
			es.counts = decodeCounts(d, nb, true)
		}
		se.ac = ac
	}
	if d.err == nil && len(se.panes) == 0 && se.ac == nil {
		d.fail() // a held series has a pane or an accrual
	}
	return se
}

func (e *Engine) decodeResult(d *decoder, r *Result) {
	r.Agg = d.index(len(e.aggs))
	r.Key = d.bytes()
	r.Overflow = d.bool()
	r.Start, r.End = d.varint(), d.varint()
	r.late = d.bool()
	r.Count = d.uvarint()
	r.Sum = d.float()
	r.ValueCount = d.uvarint()
	r.WindowValueCount = d.uvarint()
	r.Avg, r.Min, r.Max = d.float(), d.float(), d.float()
	nq := d.count(8)
	for range nq {
		r.Quantiles = append(r.Quantiles, d.float())
	}
	if d.err != nil {
		return
	}
	a := &e.aggs[r.Agg]
	if h := decodeOptionalSketch(d, a.Histogram); h != nil { // a Result with a point alone has none
		r.setHist(h)
	}
	r.HasWindow, r.HasPoint = d.bool(), d.bool()
	pt := &r.Point
	pt.Start = d.varint()
	pt.Count, pt.ValueCount, pt.Sum = d.uvarint(), d.uvarint(), d.float()
	pt.Min, pt.Max = d.float(), d.float()
	if h := decodeOptionalSketch(d, a.Histogram); h != nil {
		r.pointSketch().CopyFrom(h)
		pt.Hist = r.pointStore
	}
	nb := a.buckets()
	// A Result without a point (a late firing of gauges alone) has no bucket counts.
	if c := decodeCounts(d, nb, a.Bounds == nil || !r.HasPoint); c != nil {
		pt.BucketCounts = r.pointCounts(len(c))
		copy(pt.BucketCounts, c)
	}
	var pointEx, maxEx *exemplar.Reservoir // where the saved exemplars go; nil: dropped
	if a.Exemplars > 0 {
		pointEx, maxEx = exemplar.New(a.Exemplars), exemplar.New(1)
	}
	decodeExemplars(d, pointEx)
	if d.bool() {
		decodeExemplars(d, maxEx)
	}
	if a.Exemplars > 0 {
		if pointEx.Len() > 0 {
			pt.Exemplars = r.pointExemplars(pointEx)
		}
		r.MaxExemplar, r.HasMaxExemplar = maxEx.Max()
	}
	if d.old {
		// A version 6 result has neither: a first firing's are its own; a late firing's are unknown
		// (0), and it gives no rate.
		if !r.late {
			r.WindowCount, r.WindowSum = r.Count, r.Sum
		}
	} else {
		r.WindowCount, r.WindowSum = d.uvarint(), d.float()
		nv := d.count(8)
		for range nv {
			r.Values = append(r.Values, d.float())
		}
		if want := len(a.Accumulators); d.err == nil && nv != want && (nv != 0 || r.HasWindow) {
			d.fail() // a firing has every accumulator's figure; a point alone has none
		}
		r.Early = d.bool()
	}
	if pt.ValueCount > pt.Count {
		d.fail()
	}
}
