package stream

import (
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// Engine is the window engine: one watermark, the series of every aggregation, and their panes.
// Ingest (Begin/Check/StageChecked/Apply/End) is safe for concurrent use; Collect, FireAll, Snapshot and Restore are
// serialized among themselves.
type Engine struct {
	g     windowing
	aggs  []Aggregation
	clock clock.Clock
	skew  int64
	wm    *watermark
	// exemplars: some aggregation keeps exemplars, and a Batch stages one per record
	exemplars bool
	// accumulators: some aggregation has accumulators, and Apply adds each record as a whole
	accumulators bool

	seed     maphash.Seed
	shards   []*shard
	mask     uint64
	overflow *shard // holds every aggregation's overflow series

	active          []atomic.Int64 // regular series held, per aggregation
	verdicts        [numVerdicts]atomic.Uint64
	aggVerdicts     [][numVerdicts]atomic.Uint64 // the same, per aggregation
	overflowRecords atomic.Uint64

	lateDirty atomic.Bool  // a record was added late since the last Collect
	dueAt     atomic.Int64 // the watermark at which the next window fires or expires

	collectMu sync.Mutex
	spare     resultBuffer

	// pin caps the watermark that batches apply to the shards while a snapshot runs (maxTime when
	// none does), so that the snapshot can take the shards one at a time at one watermark.
	pin atomic.Int64
	// The snapshot's series and results sections, kept from one snapshot to the next (under collectMu).
	snapSeries, snapResults encoder

	batches sync.Pool // of *Batch, with their staging buffers
}

// New returns an engine for cfg, or an error naming every engine-level rule that cfg breaks.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.shards
	if n <= 0 {
		n = 64
	}
	n = 1 << bits.Len(uint(n-1)) // the next power of two
	e := &Engine{
		g:           cfg.windowing(),
		aggs:        append([]Aggregation(nil), cfg.Aggregations...),
		clock:       cfg.Clock,
		skew:        int64(cfg.MaxFutureSkew),
		wm:          newWatermark(cfg),
		seed:        maphash.MakeSeed(),
		mask:        uint64(n - 1),
		active:      make([]atomic.Int64, len(cfg.Aggregations)),
		aggVerdicts: make([][numVerdicts]atomic.Uint64, len(cfg.Aggregations)),
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
	e.pin.Store(maxTime)
	e.exemplars = slices.ContainsFunc(e.aggs, func(a Aggregation) bool { return a.Exemplars > 0 })
	e.accumulators = slices.ContainsFunc(e.aggs, func(a Aggregation) bool { return len(a.Accumulators) > 0 })
	return e, nil
}

// Now reads the engine's clock.
func (e *Engine) Now() int64 { return e.clock.Now() }

// NoWatermark is what Watermark returns while no record has been accepted: below every time.
const NoWatermark = math.MinInt64

// Watermark returns W at the engine clock's now, or NoWatermark while no record has been accepted.
func (e *Engine) Watermark() int64 {
	w := e.wm.current(e.clock.Now())
	if w <= minTime {
		return NoWatermark
	}
	return w
}

// hash is a series' hash: it picks the shard (low bits) and the slot in the shard's table.
func (e *Engine) hash(agg int, key []byte) uint64 {
	return maphash.Bytes(e.seed, key) ^ uint64(agg)*0x9e3779b97f4a7c15
}

// Collect applies the idle rule at wall time now, brings every shard to the watermark, and hands
// every result produced since the last Collect to fn. The Result is only valid during the call.
func (e *Engine) Collect(now int64, fn func(*Result)) {
	e.collectMu.Lock()
	defer e.collectMu.Unlock()
	e.wm.tick(now)
	w := e.wm.current(now)
	e.lateDirty.Store(false)
	e.dueAt.Store(e.g.nextBoundary(w))
	e.flushAll(w, fn)
}

// Due reports whether Collect would fire something at wall time now: the watermark has crossed a
// window end or an expiry since the last Collect, or records were added late. The idle rule is not
// considered.
func (e *Engine) Due(now int64) bool {
	return e.lateDirty.Load() || e.wm.current(now) >= e.dueAt.Load()
}

// FireAll fires every window that holds data, as it stands, and empties the engine: the shutdown
// path when there is no storage.
func (e *Engine) FireAll(fn func(*Result)) {
	e.collectMu.Lock()
	defer e.collectMu.Unlock()
	e.flushAll(maxTime, fn)
}

// Drain fires every open window of the aggregations marked in aggs as it stands, hands every result
// produced since the last Collect to fn, and forgets those aggregations' series. The watermark does
// not move: records that still come are judged as before, and start new series. It is the shutdown of
// an input that no more records of those aggregations can reach.
func (e *Engine) Drain(aggs []bool, fn func(*Result)) {
	e.collectMu.Lock()
	defer e.collectMu.Unlock()
	e.eachShard(func(sh *shard) { sh.drain(aggs) }, fn)
}

func (e *Engine) flushAll(w int64, fn func(*Result)) {
	e.eachShard(func(sh *shard) { sh.flush(w) }, fn)
}

// eachShard runs step on every shard under its lock, then hands the shard's pending results to fn
// outside it (under collectMu).
func (e *Engine) eachShard(step func(*shard), fn func(*Result)) {
	for _, sh := range e.allShards() {
		sh.mu.Lock()
		step(sh)
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
	HeldBy          HeldBy              // what holds the watermark back
	Sources         int                 // sources held, with per-source tracking
	verdicts        [numVerdicts]uint64 // per (record, aggregation)
	OverflowRecords uint64              // records added to an overflow series
	WindowsFired    uint64              // first firings
	LateFirings     uint64
	ActiveSeries    []int64 // regular series held, per aggregation
	OverflowActive  []bool  // whether the aggregation's overflow series holds data
}

// Verdicts returns how many of aggregation agg's records were judged on time, a late update and
// expired, since the engine started (0s for an aggregation that does not exist).
func (e *Engine) Verdicts(agg int) (onTime, lateUpdate, expired uint64) {
	if agg < 0 || agg >= len(e.aggVerdicts) {
		return 0, 0, 0
	}
	v := &e.aggVerdicts[agg]
	return v[OnTime].Load(), v[LateUpdate].Load(), v[Expired].Load()
}

// Stats reads the engine's counters.
func (e *Engine) Stats() Stats {
	now := e.clock.Now()
	st := Stats{Watermark: e.Watermark(), OverflowRecords: e.overflowRecords.Load(),
		HeldBy: e.wm.heldBy(now)}
	if e.wm.perSource {
		st.Sources = e.wm.sourceCount()
	}
	for i := range st.verdicts {
		st.verdicts[i] = e.verdicts[i].Load()
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
