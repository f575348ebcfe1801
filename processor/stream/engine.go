package stream

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"

	"github.com/windowaggregator/windowaggregator/processor/clock"
)

// Engine is the window engine: one watermark, the series of every aggregation, and their panes.
// Ingest (Begin/Add/End) is safe for concurrent use; Collect, FireAll, Snapshot and Restore are
// serialized among themselves.
type Engine struct {
	g     windowing
	aggs  []Aggregation
	clock clock.Clock
	skew  int64
	wm    *watermark

	seed     maphash.Seed
	shards   []*shard
	mask     uint64
	overflow *shard // holds every aggregation's overflow series

	active          []atomic.Int64 // regular series held, per aggregation
	verdicts        [numVerdicts]atomic.Uint64
	overflowRecords atomic.Uint64

	lateDirty atomic.Bool  // a record was added late since the last Collect
	dueAt     atomic.Int64 // the watermark at which the next window fires or expires

	collectMu sync.Mutex
	spare     resultBuffer
}

// New returns an engine for cfg, which must be valid.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.Shards
	if n <= 0 {
		n = 64
	}
	n = 1 << bitsFor(n)
	e := &Engine{
		g:      cfg.windowing(),
		aggs:   append([]Aggregation(nil), cfg.Aggregations...),
		clock:  cfg.Clock,
		skew:   int64(cfg.MaxFutureSkew),
		wm:     newWatermark(int64(cfg.MaxOutOfOrderness), int64(cfg.IdleTimeout)),
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		active: make([]atomic.Int64, len(cfg.Aggregations)),
	}
	if e.clock == nil {
		e.clock = clock.System{}
	}
	e.shards = make([]*shard, n)
	for i := range e.shards {
		e.shards[i] = newShard(e.g, e.aggs, e.active)
	}
	e.overflow = newShard(e.g, e.aggs, e.active)
	e.dueAt.Store(e.g.nextBoundary(minTime))
	return e, nil
}

func bitsFor(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

// Now reads the engine's clock.
func (e *Engine) Now() int64 { return e.clock.Now() }

// Watermark returns W, or math.MinInt64 while no record has been accepted.
func (e *Engine) Watermark() int64 {
	w := e.wm.current()
	if w <= minTime {
		return math.MinInt64
	}
	return w
}

// Batch is one batch of records judged against the watermark that held when it began. Use one Batch
// per goroutine; End it to let its accepted records move the watermark.
type Batch struct {
	e        *Engine
	now, w   int64
	maxT     int64
	accepted bool
	// Counted here and added to the engine's at End: no write to memory shared by cores per record.
	verdicts [numVerdicts]uint64
	overflow uint64
}

// Begin starts a batch at wall time now.
func (e *Engine) Begin(now int64) Batch {
	return Batch{e: e, now: now, w: e.wm.current(), maxT: minTime}
}

// Watermark returns the watermark the batch judges records by, as Engine.Watermark does.
func (b *Batch) Watermark() int64 {
	if b.w <= minTime {
		return math.MinInt64
	}
	return b.w
}

// Check judges t alone: Invalid, Future, or OnTime (which Add may still find late or expired).
func (b *Batch) Check(t int64) Verdict {
	switch {
	case t <= 0:
		return Invalid
	case t > b.now+b.e.skew || t >= maxTime:
		return Future
	}
	return OnTime
}

// Add puts a record of aggregation agg at event time t with value v into the series key and says
// what became of it. A NaN or infinite v is counted but left out of the value aggregates. The key's
// bytes are copied if the engine keeps them.
func (b *Batch) Add(agg int, key []byte, t int64, v float64) Verdict {
	e := b.e
	if vd := b.Check(t); vd != OnTime {
		b.verdicts[vd]++
		return vd
	}
	hasValue := !math.IsNaN(v) && !math.IsInf(v, 0)
	sh := e.shards[(maphash.Bytes(e.seed, key)+uint64(agg))&e.mask]
	sh.mu.Lock()
	p := e.g.paneStart(t)
	vd := e.g.classify(p, sh.observe(b.w))
	if vd == Expired {
		sh.mu.Unlock()
		b.verdicts[Expired]++
		return Expired
	}
	se := sh.lookup(agg, key)
	if se == nil {
		if e.active[agg].Add(1) > int64(e.aggs[agg].MaxSeries) {
			e.active[agg].Add(-1)
			sh.mu.Unlock()
			return b.addOverflow(agg, t, p, v, hasValue)
		}
		se = sh.insert(agg, key)
	}
	sh.add(se, p, v, hasValue, vd)
	sh.mu.Unlock()
	b.accept(t, vd)
	return vd
}

// addOverflow puts a record into the aggregation's overflow series.
func (b *Batch) addOverflow(agg int, t, p int64, v float64, hasValue bool) Verdict {
	e := b.e
	sh := e.overflow
	sh.mu.Lock()
	vd := e.g.classify(p, sh.observe(b.w))
	if vd != Expired {
		sh.add(sh.overflowSeries(agg), p, v, hasValue, vd)
	}
	sh.mu.Unlock()
	if vd == Expired {
		b.verdicts[Expired]++
		return Expired
	}
	b.overflow++
	b.accept(t, vd)
	return vd
}

func (b *Batch) accept(t int64, vd Verdict) {
	b.verdicts[vd]++
	if vd == LateUpdate && !b.e.lateDirty.Load() {
		b.e.lateDirty.Store(true)
	}
	b.accepted = true
	b.maxT = max(b.maxT, t)
}

// End lets the batch's accepted records move the watermark, and adds its verdicts to the counters.
func (b *Batch) End() {
	if b.accepted {
		b.e.wm.observe(b.maxT, b.now)
	}
	for i, n := range b.verdicts {
		if n > 0 {
			b.e.verdicts[i].Add(n)
		}
	}
	if b.overflow > 0 {
		b.e.overflowRecords.Add(b.overflow)
	}
	b.verdicts, b.overflow = [numVerdicts]uint64{}, 0
}

// Collect applies the idle rule at wall time now, brings every shard to the watermark, and hands
// every result produced since the last Collect to fn. The Result is only valid during the call.
func (e *Engine) Collect(now int64, fn func(*Result)) {
	e.collectMu.Lock()
	defer e.collectMu.Unlock()
	e.collectLocked(now, fn)
}

func (e *Engine) collectLocked(now int64, fn func(*Result)) {
	e.wm.tick(now)
	w := e.wm.current()
	e.lateDirty.Store(false)
	e.dueAt.Store(e.g.nextBoundary(w))
	e.flushAll(w, fn)
}

// Due reports whether Collect would fire something now: the watermark has crossed a window end or an
// expiry since the last Collect, or records were added late. The idle rule is not considered.
func (e *Engine) Due() bool {
	return e.lateDirty.Load() || e.wm.current() >= e.dueAt.Load()
}

// TryCollect is Collect unless another Collect, FireAll or Snapshot is under way, in which case it
// returns false at once: for callers on the ingest path, which should not wait for one another.
func (e *Engine) TryCollect(now int64, fn func(*Result)) bool {
	if !e.collectMu.TryLock() {
		return false
	}
	defer e.collectMu.Unlock()
	e.collectLocked(now, fn)
	return true
}

// FireAll fires every window that holds data, as it stands, and empties the engine: the shutdown
// path when there is no storage.
func (e *Engine) FireAll(fn func(*Result)) {
	e.collectMu.Lock()
	defer e.collectMu.Unlock()
	e.flushAll(maxTime, fn)
}

func (e *Engine) flushAll(w int64, fn func(*Result)) {
	for _, sh := range e.allShards() {
		sh.mu.Lock()
		sh.flush(w)
		sh.pending, e.spare = e.spare, sh.pending
		sh.mu.Unlock()
		for i := range e.spare.items {
			fn(&e.spare.items[i])
		}
		e.spare.clear()
	}
}

func (e *Engine) allShards() []*shard {
	return append(e.shards[:len(e.shards):len(e.shards)], e.overflow)
}

// Stats are the engine's counters.
type Stats struct {
	Watermark       int64               // as Watermark()
	Verdicts        [numVerdicts]uint64 // per (record, aggregation)
	OverflowRecords uint64              // records added to an overflow series
	WindowsFired    uint64              // first firings
	LateFirings     uint64
	ActiveSeries    []int64 // regular series held, per aggregation
	OverflowActive  []bool  // whether the aggregation's overflow series holds data
}

// Stats reads the engine's counters.
func (e *Engine) Stats() Stats {
	st := Stats{Watermark: e.Watermark(), OverflowRecords: e.overflowRecords.Load()}
	for i := range st.Verdicts {
		st.Verdicts[i] = e.verdicts[i].Load()
	}
	for _, sh := range e.allShards() {
		sh.mu.Lock()
		st.WindowsFired += sh.windowsFired
		st.LateFirings += sh.lateFirings
		sh.mu.Unlock()
	}
	st.ActiveSeries = make([]int64, len(e.aggs))
	st.OverflowActive = make([]bool, len(e.aggs))
	for i := range e.aggs {
		st.ActiveSeries[i] = e.active[i].Load()
	}
	e.overflow.mu.Lock()
	for i, se := range e.overflow.overflow {
		st.OverflowActive[i] = se != nil
	}
	e.overflow.mu.Unlock()
	return st
}
