package stream

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
)

// Batch is one batch of records judged against the watermark that held when it began. Use one Batch
// per goroutine; End it to let its accepted records move the watermark, after which it must not be
// used.
//
// Records are staged with StageChecked and added together by Apply, which takes each shard's lock once for
// all of its records and lets the processor overlap their memory accesses. However the records of a
// batch are split among Applies, each record gets the same verdict. Which new series get the
// max_series slots can differ: a shard releases its expired series when a record first touches it
// after the watermark moved, and Apply touches every shard of its records before it creates any
// series.
type Batch struct {
	e      *Engine
	now, w int64
	maxT   int64
	// Counted here, by aggregation, and added to the engine's at End: no write to memory shared by
	// cores per record.
	verdicts [][numVerdicts]uint64
	overflow uint64

	// paneLo is the start of the pane computed last: records of a batch mostly share a pane, and a
	// division per record is not free.
	paneLo int64

	// With per-source tracking: the source of the records staged next (see SetSource), and, indexed by
	// source slot, the greatest event time accepted from each source this batch touched (noTouch:
	// untouched), listed in touched.
	src     uint16
	srcMax  []int64
	touched []sourceTouch

	staged []staged
	// exemplars holds, when the engine keeps exemplars, each staged record's, by staged index; a zero
	// TraceID: none (an aggregation without exemplars, or a record without a span).
	exemplars []exemplar.Exemplar
	// weights holds the weights of the staged records up to the last one of weight above 1 staged
	// since the last Apply, by staged index; a record past its end weighs 1. dists likewise holds
	// the distributions (StageDistribution) up to the last one; nil: a value record.
	weights []uint32
	dists   []*Distribution
	// idSpans likewise holds where each staged record's identifiers (Record.IDs) lie in ids, up to
	// the last record that had some; a record past its end has none.
	idSpans []idSpan
	ids     []uint64
	keys    []byte  // the staged keys, back to back
	order   []int32 // staged indexes grouped by shard
	counts  []int32 // per shard, then prefix sums
	fresh   []int32 // staged indexes of records whose series did not exist
	spill   []int32 // staged indexes bound for the overflow series

	// prefetch's scratch, and what it read (kept so that the reads are not optimized away)
	seenSeries []*series
	seen       uint64
}

// A pooled Batch keeps its staging buffers up to these sizes (a few usual batches' worth).
const (
	maxPooledRecords  = 1 << 14
	maxPooledKeyBytes = 1 << 20
)

// staged is a record waiting for Apply.
type staged struct {
	hash   uint64
	t, p   int64 // event time, pane start
	v      float64
	keyOff uint32
	keyLen uint32
	agg    uint16
	src    uint16 // source slot, with per-source tracking
	tag    int32
}

// idSpan is where a staged record's identifiers lie in Batch.ids.
type idSpan struct{ off, n uint32 }

// noTouch marks a source slot that the batch has not touched.
const noTouch = minTime - 1

// Begin starts a batch at wall time now.
func (e *Engine) Begin(now int64) *Batch {
	b, _ := e.batches.Get().(*Batch)
	if b == nil {
		b = new(Batch)
	}
	b.e, b.now, b.w, b.maxT, b.paneLo = e, now, min(e.wm.current(now), e.pin.Load()), minTime, maxTime
	b.src = 0
	if len(b.verdicts) != len(e.aggs) {
		b.verdicts = make([][numVerdicts]uint64, len(e.aggs))
	}
	if e.wm.perSource {
		b.touchSource(0, 0) // records staged before any SetSource belong to the shared source
	}
	return b
}

// SetSource names the source of the records staged next, by the values of the per-source keys on
// their resource: it is looked up once, for all of them. shared reports that the source is one past
// max_sources, held in the shared source. Without per-source tracking it does nothing.
func (b *Batch) SetSource(key []byte) (shared bool) {
	wm := b.e.wm
	if !wm.perSource {
		return false
	}
	idx, gen, shared := wm.lookup(key, b.now)
	b.touchSource(idx, gen)
	return shared
}

// touchSource makes source slot idx (of generation gen) the one of the records staged next.
func (b *Batch) touchSource(idx int32, gen uint32) {
	if int(idx) >= len(b.srcMax) {
		n := len(b.srcMax)
		b.srcMax = append(b.srcMax, make([]int64, int(idx)+1-n)...)
		for i := n; i < len(b.srcMax); i++ {
			b.srcMax[i] = noTouch
		}
	}
	if b.srcMax[idx] == noTouch {
		b.srcMax[idx] = minTime
		b.touched = append(b.touched, sourceTouch{idx: idx, gen: gen})
	}
	b.src = uint16(idx)
}

// Watermark returns the watermark the batch judges records by, as Engine.Watermark does.
func (b *Batch) Watermark() int64 {
	if b.w <= minTime {
		return NoWatermark
	}
	return b.w
}

// Check judges t alone: Invalid, Future, or OnTime (which Apply may still find late or expired).
func (b *Batch) Check(t int64) Verdict {
	switch {
	case t <= 0:
		return Invalid
	case t > b.now+b.e.skew || t >= maxTime:
		return Future
	}
	return OnTime
}

// ExpiresAt returns the watermark at which a record at t, which Check has passed, has expired for
// every window that holds it: the end of the latest of them plus the allowed lateness.
func (b *Batch) ExpiresAt(t int64) int64 {
	g := &b.e.g
	return g.lastEnd(b.paneStart(t)) + g.lateness
}

// paneStart returns the start of the pane that holds t, which Check has passed.
func (b *Batch) paneStart(t int64) int64 {
	if t < b.paneLo || t-b.paneLo >= b.e.g.slide {
		b.paneLo = b.e.g.paneStart(t)
	}
	return b.paneLo
}

// StageChecked queues record r, whose verdict comes from Apply. Its time must be one that Check has
// found OnTime in this batch: the caller checks it, once for a record it stages for several
// aggregations.
func (b *Batch) StageChecked(r *Record) {
	b.staged = append(b.staged, staged{
		hash: b.e.hash(r.Agg, r.Key), t: r.Time, p: b.paneStart(r.Time), v: r.Value,
		keyOff: uint32(len(b.keys)), keyLen: uint32(len(r.Key)), agg: uint16(r.Agg), src: b.src, tag: r.Tag,
	})
	b.keys = append(b.keys, r.Key...)
	if b.e.exemplars {
		b.stageExemplar(r)
	}
	if r.Weight > 1 {
		b.stageWeight(r.Weight)
	}
	if len(r.IDs) > 0 && len(b.e.aggs[r.Agg].Accumulators) > 0 {
		b.idSpans = setLast(b.idSpans, len(b.staged), idSpan{}, idSpan{uint32(len(b.ids)), uint32(len(r.IDs))})
		b.ids = append(b.ids, r.IDs...)
	}
}

// StageDistribution queues record r, whose value is the distribution d rather than r.Value (r.Value,
// r.Weight and r's span ids are not read: a distribution gives no exemplar), as StageChecked does a
// value record. The caller keeps d unchanged until Apply.
func (b *Batch) StageDistribution(r *Record, d *Distribution) {
	b.StageChecked(&Record{Agg: r.Agg, Key: r.Key, Time: r.Time, Tag: r.Tag, IDs: r.IDs}) // weight 1, no exemplar
	b.dists = setLast(b.dists, len(b.staged), nil, d)
}

// setLast returns side array s (of the staged records, up to the last it has an entry for) with
// entry v for the record staged last, the nth, and fill for those staged since its last entry.
func setLast[T any](s []T, n int, fill, v T) []T {
	for len(s) < n-1 {
		s = append(s, fill)
	}
	return append(s, v)
}

// distAt returns staged record i's distribution, or nil for a value record.
func (b *Batch) distAt(i int32) *Distribution {
	if int(i) < len(b.dists) {
		return b.dists[i]
	}
	return nil
}

// stageWeight records weight w of the record staged last, and weight 1 for the records staged since
// the last one it recorded.
func (b *Batch) stageWeight(w uint32) { b.weights = setLast(b.weights, len(b.staged), 1, w) }

// itemAt returns what staged record i adds: its value at its weight, or its distribution.
func (b *Batch) itemAt(i int32) item {
	r := &b.staged[i]
	return item{v: r.v, n: b.weightAt(i), hasValue: !math.IsNaN(r.v) && !math.IsInf(r.v, 0), dist: b.distAt(i), ids: b.idsAt(i)}
}

// idsAt returns staged record i's identifiers, or nil.
func (b *Batch) idsAt(i int32) []uint64 {
	if int(i) < len(b.idSpans) {
		sp := b.idSpans[i]
		return b.ids[sp.off : sp.off+sp.n]
	}
	return nil
}

// weightAt returns staged record i's weight.
func (b *Batch) weightAt(i int32) uint64 {
	if int(i) < len(b.weights) {
		return uint64(b.weights[i])
	}
	return 1
}

// stageExemplar stages record r's exemplar: its span, its value and its time (the span's end).
func (b *Batch) stageExemplar(r *Record) {
	var ex exemplar.Exemplar
	if b.e.aggs[r.Agg].Exemplars > 0 && r.TraceID != ([16]byte{}) {
		ex = exemplar.Exemplar{TraceID: r.TraceID, SpanID: r.SpanID, Value: r.Value, Time: r.Time,
			Priority: exemplar.PriorityOf(r.TraceID, r.SpanID)}
	}
	b.exemplars = append(b.exemplars, ex)
}

// exemplarAt returns staged record i's exemplar, or nil.
func (b *Batch) exemplarAt(i int32) *exemplar.Exemplar {
	if len(b.exemplars) == 0 {
		return nil
	}
	if ex := &b.exemplars[i]; ex.TraceID != ([16]byte{}) {
		return ex
	}
	return nil
}

// Apply adds every record staged since the last Apply, shard by shard, and calls late with the tag
// and verdict of each that was not OnTime (LateUpdate or Expired), and the watermark w it was judged
// by: the batch's, or a newer one if a concurrent batch or the idle rule had moved the record's shard
// further. late runs under a shard's lock: it must not call into the engine.
func (b *Batch) Apply(late func(tag int32, vd Verdict, w int64)) {
	if len(b.staged) == 0 {
		return
	}
	e := b.e
	// Group the staged records by shard (a counting sort, stable).
	n := len(e.shards)
	b.counts = append(b.counts[:0], make([]int32, n+1)...)
	for i := range b.staged {
		b.counts[b.staged[i].hash&e.mask+1]++
	}
	for i := 1; i <= n; i++ {
		b.counts[i] += b.counts[i-1]
	}
	b.order = append(b.order[:0], make([]int32, len(b.staged))...)
	next := b.counts[:n] // the next position of each shard, advanced in place
	for i := range b.staged {
		s := b.staged[i].hash & e.mask
		b.order[next[s]] = int32(i)
		next[s]++
	}
	// next[s] now ends shard s's run; shard s starts where shard s-1 ends. The walk starts at a
	// random shard, so that batches applied at the same time do not queue behind one another
	// shard after shard.
	first := rand.IntN(n)
	for k := 0; k < n; k++ {
		s := first + k
		if s >= n {
			s -= n
		}
		lo, hi := int32(0), next[s]
		if s > 0 {
			lo = next[s-1]
		}
		if hi > lo {
			b.applyShard(e.shards[s], b.order[lo:hi], late)
		}
	}
	if len(b.fresh) > 0 {
		b.applyFresh(late)
	}
	if len(b.spill) > 0 {
		b.applyOverflow(late)
	}
	b.staged, b.keys, b.fresh, b.spill = b.staged[:0], b.keys[:0], b.fresh[:0], b.spill[:0]
	b.exemplars, b.weights, b.idSpans, b.ids = b.exemplars[:0], b.weights[:0], b.idSpans[:0], b.ids[:0]
	clear(b.dists)
	b.dists = b.dists[:0]
}

// applyShard adds the records of one shard whose series exist, and sets aside the others.
func (b *Batch) applyShard(sh *shard, idx []int32, late func(int32, Verdict, int64)) {
	sh.mu.Lock()
	w := sh.observe(b.w)
	b.prefetch(sh, idx)
	if len(b.exemplars) > 0 || len(b.weights) > 0 || len(b.dists) > 0 || b.e.accumulators {
		b.applyShardStaged(sh, idx, w, late)
		sh.mu.Unlock()
		return
	}
	for _, i := range idx {
		r := &b.staged[i]
		vd, _, ok := sh.addExisting(w, int(r.agg), r.hash, b.keys[r.keyOff:r.keyOff+r.keyLen], r.p, r.v, 1)
		if !ok {
			b.fresh = append(b.fresh, i)
			continue
		}
		b.done(r, vd, w, late)
	}
	sh.mu.Unlock()
}

// applyShardStaged is applyShard's loop for a batch that staged exemplars, weights or distributions,
// or of an engine with accumulators: each record as a whole (shard.addItem).
func (b *Batch) applyShardStaged(sh *shard, idx []int32, w int64, late func(int32, Verdict, int64)) {
	for _, i := range idx {
		r := &b.staged[i]
		vd, se, ok := sh.lookup(w, int(r.agg), r.hash, b.keys[r.keyOff:r.keyOff+r.keyLen], r.p)
		if !ok {
			b.fresh = append(b.fresh, i)
			continue
		}
		if se != nil {
			it := b.itemAt(i)
			sh.addItem(se, r.p, &it, vd, b.exemplarAt(i))
		}
		b.done(r, vd, w, late)
	}
}

// prefetch reads, for all of a shard's records at once and one level at a time, the memory that
// adding them will read: the table slot, then the series, on the lines of its key, its head and its
// next pending value. Each level's reads are independent of one another, so the processor overlaps
// their cache misses, where adding the records one by one would wait for every miss of one record's
// chain in turn. It changes nothing: a guess that is wrong (a series further along its probe run)
// only reads something else. Neither the pane nor its sketch is read: a record adds to its series'
// head, and reads its pane only when the head moves to it; one record in pendingValues inserts the
// values gathered into the sketch (see series.head and shard.add).
//
// It runs for every batch, because in a collector the engine's state is cold when a batch comes: the
// receiver has decoded the batch and much else has run since the last one, so a batch's records
// arrive as cache misses, which prefetching overlaps, even with few series. Only when batches follow
// one another with nothing in between, as in a benchmark, does the state stay in cache, and there
// the extra pass is a small overhead. bench/ measures both (BENCH_COLD_BYTES for the cold state).
func (b *Batch) prefetch(sh *shard, idx []int32) {
	if len(idx) < 2 || len(sh.table.slots) == 0 {
		return
	}
	var seen uint64
	ses := b.seenSeries[:0]
	for _, i := range idx {
		ses = append(ses, sh.table.slots[sh.table.pos(b.staged[i].hash)].se)
	}
	// The series' key, its head and its next pending value (see series): one level.
	for _, se := range ses {
		if se != nil {
			if len(se.key) > 0 {
				seen += uint64(se.key[0])
			}
			seen += se.head.count
			seen += math.Float64bits(se.pending[se.npending&(pendingValues-1)])
		}
	}
	clear(ses)
	b.seenSeries, b.seen = ses, b.seen+seen
}

// applyFresh adds the records whose series did not exist, in the order they were staged, creating
// their series while max_series allows and setting aside the rest for the overflow series.
func (b *Batch) applyFresh(late func(int32, Verdict, int64)) {
	slices.Sort(b.fresh)
	e := b.e
	for _, i := range b.fresh {
		r := &b.staged[i]
		sh := e.shards[r.hash&e.mask]
		sh.mu.Lock()
		w := sh.observe(b.w)
		it := b.itemAt(i)
		vd, full := sh.addOrCreate(w, int(r.agg), r.hash, b.keys[r.keyOff:r.keyOff+r.keyLen], r.p, &it, b.exemplarAt(i))
		sh.mu.Unlock()
		if full {
			b.spill = append(b.spill, i)
			continue
		}
		b.done(r, vd, w, late)
	}
}

// done records the verdict of staged record r, judged by watermark w.
func (b *Batch) done(r *staged, vd Verdict, w int64, late func(int32, Verdict, int64)) {
	b.accept(r, vd)
	if vd != OnTime {
		late(r.tag, vd, w)
	}
}

func (b *Batch) applyOverflow(late func(int32, Verdict, int64)) {
	sh := b.e.overflow
	sh.mu.Lock()
	w := sh.observe(b.w)
	for _, i := range b.spill {
		r := &b.staged[i]
		it := b.itemAt(i)
		vd := sh.addOverflow(w, int(r.agg), r.p, &it, b.exemplarAt(i))
		if vd != Expired {
			b.overflow++
		}
		b.done(r, vd, w, late)
	}
	sh.mu.Unlock()
}

// Verdicts returns how many of aggregation agg's records the batch has judged vd, before End.
func (b *Batch) Verdicts(agg int, vd Verdict) uint64 {
	if agg < 0 || agg >= len(b.verdicts) {
		return 0
	}
	return b.verdicts[agg][vd]
}

func (b *Batch) accept(r *staged, vd Verdict) {
	b.verdicts[r.agg][vd]++
	if vd == Expired {
		return
	}
	if vd == LateUpdate && !b.e.lateDirty.Load() {
		b.e.lateDirty.Store(true)
	}
	b.maxT = max(b.maxT, r.t)
	if len(b.touched) > 0 && r.t > b.srcMax[r.src] {
		b.srcMax[r.src] = r.t
	}
}

// End lets the batch's accepted records move the watermark, adds its verdicts to the counters, and
// gives the batch back to the engine. Records staged and not applied are dropped.
func (b *Batch) End() {
	e := b.e
	if b.maxT > minTime { // a record was accepted (accepted records have t > 0)
		for i := range b.touched {
			b.touched[i].maxT = b.srcMax[b.touched[i].idx]
		}
		e.wm.observe(b.maxT, b.now, b.touched)
	}
	for _, tc := range b.touched {
		b.srcMax[tc.idx] = noTouch
	}
	b.touched = b.touched[:0]
	for agg := range b.verdicts {
		for vd, n := range b.verdicts[agg] {
			if n > 0 {
				e.verdicts[vd].Add(n)
				e.aggVerdicts[agg][vd].Add(n)
			}
		}
	}
	if b.overflow > 0 {
		e.overflowRecords.Add(b.overflow)
	}
	clear(b.verdicts)
	b.overflow = 0
	b.staged, b.keys, b.fresh, b.spill = b.staged[:0], b.keys[:0], b.fresh[:0], b.spill[:0]
	b.exemplars, b.weights, b.idSpans, b.ids = b.exemplars[:0], b.weights[:0], b.idSpans[:0], b.ids[:0]
	clear(b.dists)
	b.dists = b.dists[:0]
	if cap(b.keys) > maxPooledKeyBytes || cap(b.staged) > maxPooledRecords || cap(b.seenSeries) > maxPooledRecords {
		// One huge request must not leave its buffers behind in the pool.
		b.staged, b.keys, b.order, b.fresh, b.spill = nil, nil, nil, nil, nil
		b.seenSeries, b.exemplars, b.weights, b.dists, b.idSpans, b.ids = nil, nil, nil, nil, nil, nil
	}
	b.e = nil
	e.batches.Put(b)
}
