package stream

// A brute-force reference model of the engine's contract, the firings it and the engine report, and the
// model's check against hand-computed cases. model_scenario_test.go generates the streams and runs them
// against the engine; the tests of model_engine_test.go hold the engine to the model.
//
// The model knows nothing of panes, shards or flush points: it keeps every accepted record, remembers
// for every window (aggregation, key, start) which records were added to it and which of them were added
// late since the previous Collect, and recomputes every result from those records at every firing. It
// is written from the contract (doc.go, verdict.go, result.go and the semantics below), not from the
// engine's code:
//
//   - A window is [start, start+size) with start offset plus a multiple of slide; a record at t is
//     in size/slide windows.
//   - W starts at -infinity. At a moment t it is the greatest value min(E(s), s) - max_out_of_orderness
//     took at any moment s <= t, or the idle rule's if that is greater: it never moves back. E is the
//     greatest accepted event time or, with per_source, the least of the greatest accepted event times
//     of the sources heard from (a record of theirs accepted) within source_idle_timeout. A source is held
//     from the batch that first names it, while fewer than max_sources are held, until it has not been
//     heard from (counting from that batch too) for source_idle_timeout; the sources past max_sources
//     count as one shared source, which forgets its event time when silent for source_idle_timeout.
//   - A batch judges all its records against the W of Begin(now); its accepted records change E at End,
//     at its wall time. At Collect(now), if idle_timeout > 0, a record was ever accepted and now -
//     lastAcceptWall >= idle_timeout, W = max(W, min(wLast + (now - lastAcceptWall), now -
//     max_out_of_orderness)), with lastAcceptWall the wall time of the last batch that accepted a record
//     and wLast W after it.
//   - A restore at wall time now is a restart: lastAcceptWall = now, wLast = the saved W, and every
//     source that had a record accepted is heard from at now (one without is not saved).
//   - t <= 0: Invalid. t > now + max_future_skew: Future. Otherwise for every window w containing t: W <
//     w.end: added; w.end <= W < w.end+lateness: added (late); else expired for it. All expired: Expired;
//     some window took it late: LateUpdate; else OnTime.
//   - Once W >= end, at a Collect or at a Begin (W moves with the wall clock in between), a window that
//     holds a record fires with the whole window, handed out at the next Collect. At later Collects it
//     fires again (Late) if records were added to it late since the previous Collect,
//     with Count, Sum, ValueCount and Hist of those records and Avg, Min, Max, Quantiles and
//     WindowValueCount of the whole window. Once W >= end + lateness it is discarded. FireAll fires every
//     window not discarded: a never-fired one as a first firing, a fired one with late records pending as
//     a late firing.
//   - Sum, ValueCount, Min, Max, Avg, Quantiles and Hist cover the finite values only. Quantile q of the n
//     sorted finite values is the nearest-rank one, x_(ceil(q*n)-1) (see quantileIndex); the engine's
//     estimate must be within 1% of it.
//   - A record of weight w stands for w records of its value: it adds w to Count, ValueCount and the
//     histogram's count, w*v to Sum; Avg is the weighted mean and quantile q the value at rank
//     ceil(q*n)-1 of the values each repeated w times (n their total weight); Min and Max are
//     unchanged.
//
// Collect is called after every batch, which makes the model exact.
//
// The streams' wall clock runs at times ahead of their event times and at times behind them (records
// stamped ahead of the clock, within max_future_skew); with per_source each record names one of a few
// sources, some tens of seconds behind the others, some silent for longer than source_idle_timeout, and
// in one configuration more of them than max_sources.
//
// On a mismatch the test shrinks the failing stream to a minimal one and prints it with the model's and
// the engine's view of every step. Environment switches, for investigating:
//
//	STREAM_MODEL_SEEDS=n              n seeds per configuration instead of the default
//	STREAM_MODEL_ONLY=name:seed       run one stream only and log its full trace
//	STREAM_MODEL_QUANTILE=floor        quantiles as x_floor(q*(n-1)) instead of the nearest rank x_(ceil(q*n)-1)

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"sort"
	"strconv"
	"sync"
)

// The reference model.

// nearestRank makes the model's quantile q of n sorted values the nearest-rank one, x_(ceil(q*n)-1), as
// the engine reports it. It is the default; STREAM_MODEL_QUANTILE=floor turns it off, for
// x_floor(q*(n-1)) instead.
var nearestRank = os.Getenv("STREAM_MODEL_QUANTILE") != "floor"

// quantileIndex returns the 0-based index, among n sorted values, of the model's quantile q: with
// nearestRank, ceil(q*n)-1 clamped to [0, n-1], computed exactly with q taken as the decimal it is
// written as (0.9 is 9/10); without it, floor(q*(n-1)) in float64.
func quantileIndex(q float64, n int) int {
	if !nearestRank {
		return int(math.Floor(q * float64(n-1)))
	}
	type qn struct {
		q float64
		n int
	}
	if k, ok := nearestRankCache.Load(qn{q, n}); ok {
		return k.(int)
	}
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(q, 'g', -1, 64))
	if !ok {
		panic(q)
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(n)))
	num, den := r.Num(), r.Denom() // r >= 0
	k := new(big.Int).Add(num, new(big.Int).Sub(den, big.NewInt(1)))
	k.Quo(k, den) // ceil(q*n)
	idx := int(min(max(k.Int64()-1, 0), int64(n-1)))
	nearestRankCache.Store(qn{q, n}, idx)
	return idx
}

var nearestRankCache sync.Map

type refRec struct {
	agg int
	key string
	t   int64
	v   float64
	src string // per_source: the record's source
	w   uint32 // weight: the records it stands for; 0 means 1, as for stream.Record
	// dist, when not nil, makes the record a distribution of these finite values (a histogram data
	// point), staged with StageDistribution (v and w unused); noMinMax: it does not say their min and
	// max.
	dist     []float64
	noMinMax bool
	// id is the record's identifier for the aggregations' distinct accumulators (0: none); staged as
	// idHash(id).
	id uint64
}

// recIDOf is a record's identifier drawn from its value, so that the scenarios' random draws stay as
// they were: 0 (none) to 127, repeated where values repeat.
func recIDOf(v float64) uint64 { return math.Float64bits(v) * 0x9e3779b97f4a7c15 >> 57 }

// idHash is what a record's identifier is staged as: a bijective mix of it (SplitMix64's
// finalizer), well spread as the component's hashes are, 0 kept for none.
func idHash(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ids returns what r stages as its identifiers: idHash(r.id), or none.
func (r *refRec) ids() []uint64 {
	if r.id == 0 {
		return nil
	}
	return []uint64{idHash(r.id)}
}

// weight returns the records r stands for.
func (r *refRec) weight() uint64 {
	if r.dist != nil {
		return uint64(len(r.dist))
	}
	return uint64(max(r.w, 1))
}

// values returns r's finite values, each with the records it stands for.
func (r *refRec) values() []weighted {
	if r.dist != nil {
		out := make([]weighted, len(r.dist))
		for i, v := range r.dist {
			out[i] = weighted{v, 1}
		}
		return out
	}
	if !finite(r.v) {
		return nil
	}
	return []weighted{{r.v, r.weight()}}
}

type refWinID struct {
	agg   int
	key   string
	start int64
}

type refWin struct {
	all   []int // indices into refModel.recs of every record added to the window
	late  []int // those added late since the previous Collect
	fired bool
}

// refSource is a source of the per_source model: one held in a place of its own, or the shared one.
type refSource struct {
	heard    int64 // wall time it was last heard from: its last batch with an accepted record, or the batch that first named it
	hasEvent bool  // a record of it was accepted since it was first held (the shared one: since it was last silent)
	maxEvent int64 // the greatest of those records' event times
}

type refModel struct {
	size, slide, lateness, ooo, idle, skew int64
	offset                                 int64 // windows start at offset + k × slide
	perSource                              bool
	sourceIdle                             int64
	maxSources                             int
	aggs                                   []Aggregation

	wSet bool  // false: W is -infinity
	w    int64 // W when wSet
	// wAt is the last wall time W was brought to: W never moves back, so it is the greatest value it
	// took at any moment up to wAt.
	wAt int64

	anyAccepted bool  // without per_source: a record was accepted
	maxEver     int64 // without per_source: the greatest accepted event time

	// The idle rule counts silence from lastAcceptWall, the wall time of the last batch that accepted a
	// record or of the last restore, and advances W from wLast, W then.
	idleArmed      bool
	lastAcceptWall int64
	wLast          int64

	sources map[string]*refSource // per_source: the sources held in a place of their own, by name
	shared  refSource             // per_source: the one every source past max_sources counts in

	recs  []refRec
	wins  map[refWinID]*refWin // windows holding data and not discarded
	added map[refWinID]uint64  // records ever added, weighted, per window (discarded ones too)

	pending []firingRec // firings made since the last Collect

	quiet bool // keep the state only; build no results (used by the stream generator and the fuzz target)
}

func newRefModel(c *modelConfig) *refModel {
	return &refModel{
		size: int64(c.size), slide: int64(c.slideOrSize()), offset: int64(c.offset), lateness: int64(c.lateness), ooo: int64(c.ooo),
		idle: int64(c.idle), skew: int64(c.skew), aggs: c.aggs,
		perSource: c.perSource, sourceIdle: int64(c.sourceIdle), maxSources: c.maxSources,
		wAt:  math.MinInt64,
		wins: map[refWinID]*refWin{}, added: map[refWinID]uint64{}, sources: map[string]*refSource{},
	}
}

// watermark returns W as Engine.Watermark does: math.MinInt64 for -infinity.
func (m *refModel) watermark() int64 {
	if !m.wSet {
		return math.MinInt64
	}
	return m.w
}

// watermarkAt brings W to wall time now and returns it, as Engine.Watermark does with its clock at now.
func (m *refModel) watermarkAt(now int64) int64 {
	m.advance(now)
	return m.watermark()
}

func (m *refModel) raise(v int64) {
	if !m.wSet || v > m.w {
		m.w, m.wSet = v, true
	}
}

// heardWithin reports whether source s counts at wall time now: it was heard from less than
// source_idle_timeout before.
func (m *refModel) heardWithin(s *refSource, now int64) bool { return now-s.heard < m.sourceIdle }

// eventAt returns the event time W follows at wall time now, if there is one: the greatest accepted
// one, or with per_source the least of the greatest accepted ones of the sources heard from within
// source_idle_timeout.
func (m *refModel) eventAt(now int64) (int64, bool) {
	if !m.perSource {
		return m.maxEver, m.anyAccepted
	}
	least, ok := int64(0), false
	consider := func(s *refSource) {
		if s.hasEvent && m.heardWithin(s, now) && (!ok || s.maxEvent < least) {
			least, ok = s.maxEvent, true
		}
	}
	for _, s := range m.sources {
		consider(s)
	}
	consider(&m.shared)
	return least, ok
}

// advance brings W from wAt to wall time now. At each moment t, W is at least min(event time, t) -
// max_out_of_orderness, and it never moves back: with per_source the event time changes in between
// only where a source falls silent, and min(event, t) grows with t, so the greatest value W took is
// at now or at the last nanosecond before one of those silences. Then the sources silent at now are
// released (and the shared one forgets its event time).
func (m *refModel) advance(now int64) {
	at := []int64{now}
	if m.perSource {
		for _, s := range m.sources {
			at = append(at, s.heard+m.sourceIdle-1)
		}
		at = append(at, m.shared.heard+m.sourceIdle-1)
	}
	for _, t := range at {
		if t > now || (t < now && t <= m.wAt) {
			continue
		}
		if e, ok := m.eventAt(t); ok {
			m.raise(min(e, t) - m.ooo)
		}
	}
	m.wAt = max(m.wAt, now)
	for name, s := range m.sources {
		if !m.heardWithin(s, now) {
			delete(m.sources, name)
		}
	}
	if m.shared.hasEvent && !m.heardWithin(&m.shared, now) {
		m.shared = refSource{}
	}
}

// mod returns a mod b in [0, b), b > 0.
func mod(a, b int64) int64 { return ((a % b) + b) % b }

// windowStarts lists the start of every window containing t, by walking back from the latest one.
func (m *refModel) windowStarts(t int64) []int64 {
	var out []int64
	for s := t - mod(t-m.offset, m.slide); s+m.size > t; s -= m.slide {
		if s > t {
			panic("model: window start after t")
		}
		out = append(out, s)
	}
	if int64(len(out)) != m.size/m.slide {
		panic(fmt.Sprintf("model: %d windows contain %d, want %d", len(out), t, m.size/m.slide))
	}
	return out
}

type refBatch struct {
	m    *refModel
	now  int64
	wSet bool
	w    int64
	any  bool
	maxT int64

	src    *refSource           // per_source: the source of the records added next
	srcMax map[*refSource]int64 // per_source: the greatest accepted event time of each source
}

func (m *refModel) begin(now int64) *refBatch {
	m.advance(now)
	m.fireDue(false)
	return &refBatch{m: m, now: now, wSet: m.wSet, w: m.w}
}

// source names the source of the records added next, as Batch.SetSource does, and reports whether it
// is one past max_sources, counted in the shared source. A source is held from the batch that first
// names it while fewer than max_sources are held, until it has not been heard from for
// source_idle_timeout. Without per_source it does nothing.
func (b *refBatch) source(name string) (shared bool) {
	m := b.m
	if !m.perSource {
		return false
	}
	if s := m.sources[name]; s != nil {
		b.src = s
		return false
	}
	if len(m.sources) < m.maxSources {
		s := &refSource{heard: b.now}
		m.sources[name] = s
		b.src = s
		return false
	}
	b.src = &m.shared
	return true
}

func (b *refBatch) watermarkOrInf() int64 {
	if !b.wSet {
		return math.MinInt64
	}
	return b.w
}

// windowFate says what becomes of a record in window [start, start+size) at the batch's W.
func (b *refBatch) windowFate(start int64) Verdict {
	end := start + b.m.size
	switch {
	case !b.wSet || b.w < end:
		return OnTime
	case b.w < end+b.m.lateness:
		return LateUpdate
	default:
		return Expired
	}
}

func (b *refBatch) add(agg int, key string, t int64, v float64) Verdict {
	return b.addRec(refRec{agg: agg, key: key, t: t, v: v})
}

// addRec adds record r, of its weight, and returns its verdict.
func (b *refBatch) addRec(r refRec) Verdict {
	m := b.m
	agg, key, t := r.agg, r.key, r.t
	if t <= 0 {
		return Invalid
	}
	if t > b.now+m.skew {
		return Future
	}
	var onTime, late []int64
	for _, s := range m.windowStarts(t) {
		switch b.windowFate(s) {
		case OnTime:
			onTime = append(onTime, s)
		case LateUpdate:
			late = append(late, s)
		}
	}
	if len(onTime)+len(late) == 0 {
		return Expired
	}
	i := len(m.recs)
	m.recs = append(m.recs, r)
	for _, s := range onTime {
		w := m.window(refWinID{agg, key, s}, r.weight())
		w.all = append(w.all, i)
	}
	for _, s := range late {
		w := m.window(refWinID{agg, key, s}, r.weight())
		w.all = append(w.all, i)
		w.late = append(w.late, i)
	}
	if !b.any || t > b.maxT {
		b.maxT = t
	}
	b.any = true
	if b.src != nil {
		if b.srcMax == nil {
			b.srcMax = map[*refSource]int64{}
		}
		if cur, ok := b.srcMax[b.src]; !ok || t > cur {
			b.srcMax[b.src] = t
		}
	}
	if len(late) > 0 {
		return LateUpdate
	}
	return OnTime
}

// window returns window id, counting a record of weight n as added to it.
func (m *refModel) window(id refWinID, n uint64) *refWin {
	m.added[id] += n
	w := m.wins[id]
	if w == nil {
		w = &refWin{}
		m.wins[id] = w
	}
	return w
}

// end lets the batch's accepted records raise W, at the batch's wall time.
func (b *refBatch) end() {
	if !b.any {
		return
	}
	m := b.m
	if !m.anyAccepted || b.maxT > m.maxEver {
		m.maxEver = b.maxT
	}
	m.anyAccepted = true
	for s, t := range b.srcMax {
		if !s.hasEvent || t > s.maxEvent {
			s.maxEvent = t
		}
		s.hasEvent = true
		s.heard = max(s.heard, b.now)
	}
	m.advance(b.now)
	m.idleArmed, m.lastAcceptWall, m.wLast = m.wSet, b.now, m.w
}

// collect applies the idle rule at now and returns the firings of this Collect.
func (m *refModel) collect(now int64) []firingRec {
	m.advance(now)
	if m.idle > 0 && m.idleArmed && now-m.lastAcceptWall >= m.idle {
		m.raise(min(m.wLast+(now-m.lastAcceptWall), now-m.ooo))
	}
	m.fireDue(true)
	out := m.pending
	m.pending = nil
	sortFirings(out)
	return out
}

// fireDue fires every window that W has reached and that has not fired, and discards the windows W
// has expired. A window fires once W reaches its end, whenever that is: W also moves with the wall
// clock between batches, so a window can fire when a batch begins, before the batch's records come (a
// late one of them then makes a late firing). Firings wait in pending for the next Collect. Late
// firings are made at Collect (atCollect), of the records added late since the one before.
func (m *refModel) fireDue(atCollect bool) {
	for id, w := range m.wins {
		end := id.start + m.size
		switch {
		case !w.fired && m.wSet && m.w >= end:
			// A window whose first records came late (its end had passed W when they were added) still
			// fires a first firing, with them.
			m.pending = m.fire(m.pending, id, w, false)
			w.fired = true
			w.late = w.late[:0]
		case atCollect && w.fired && len(w.late) > 0:
			m.pending = m.fire(m.pending, id, w, true)
		}
		if atCollect {
			if len(w.late) > 0 && !w.fired {
				panic("model: late records in a window that has not fired")
			}
			w.late = w.late[:0]
		}
		if m.wSet && m.w >= end+m.lateness {
			delete(m.wins, id)
		}
	}
}

// snapshot is Snapshot at wall time now: the saved W is W at now.
func (m *refModel) snapshot(now int64) { m.advance(now) }

// restore is the Restore, at wall time now (at or after the snapshot's), of the last snapshot: the
// state is the snapshot's, and the time the collector was not running counts as silence neither for
// the idle rule nor for any source. The idle rule counts from now and advances from the saved W; every
// source that had a record accepted counts as heard from at now (a source named but without an
// accepted record is not kept).
func (m *refModel) restore(now int64) {
	if m.wSet {
		m.idleArmed, m.lastAcceptWall, m.wLast = true, now, m.w
	}
	for name, s := range m.sources {
		if s.hasEvent {
			s.heard = now
		} else {
			delete(m.sources, name)
		}
	}
	if m.shared.hasEvent {
		m.shared.heard = now
	}
	m.wAt = max(m.wAt, now)
}

// fireAll returns the firings of FireAll and forgets every window.
func (m *refModel) fireAll() []firingRec {
	out := m.pending
	m.pending = nil
	for id, w := range m.wins {
		switch {
		case !w.fired:
			out = m.fire(out, id, w, false)
		case len(w.late) > 0:
			out = m.fire(out, id, w, true)
		}
		delete(m.wins, id)
	}
	sortFirings(out)
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// fire recomputes one firing of window id from its records.
func (m *refModel) fire(out []firingRec, id refWinID, w *refWin, late bool) []firingRec {
	if m.quiet {
		return out
	}
	a := m.aggs[id.agg]
	f := firingRec{Agg: id.agg, Key: id.key, Start: id.start, End: id.start + m.size, Late: late}
	part := w.all
	if late {
		part = w.late
	}
	for _, i := range part {
		r := &m.recs[i]
		f.Count += r.weight()
		for _, x := range r.values() {
			f.Sum += float64(x.n) * x.v
			f.ValueCount += x.n
			f.absSum += float64(x.n) * math.Abs(x.v)
		}
	}
	var vals []weighted
	var wholeSum float64
	unknownMinMax := false // a distribution that does not say its min and max: the window has none
	for _, i := range w.all {
		r := &m.recs[i]
		unknownMinMax = unknownMinMax || r.noMinMax
		for _, x := range r.values() {
			vals = append(vals, x)
			wholeSum += float64(x.n) * x.v
			f.wholeAbsSum += float64(x.n) * math.Abs(x.v)
			f.WindowValueCount += x.n
		}
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i].v < vals[j].v })
	if n := f.WindowValueCount; n > 0 {
		f.Avg = wholeSum / float64(n)
		f.Min, f.Max = vals[0].v, vals[len(vals)-1].v
		if unknownMinMax {
			f.Min, f.Max = math.Inf(-1), math.Inf(1)
		}
		for _, q := range a.Quantiles {
			f.Quantiles = append(f.Quantiles, weightedRank(vals, uint64(quantileIndex(q, int(n)))))
		}
	}
	if a.Histogram {
		f.HasHist = true
		f.HistCount, f.HistSum, f.HistBuckets = f.ValueCount, f.Sum, f.ValueCount
	}
	for _, k := range a.Accumulators {
		f.Values = append(f.Values, m.accumulated(k, w.all, &f))
	}
	return append(out, f)
}

// accumulated is what accumulator kind k holds of records recs, worked out in the plainest way: the
// population variance of the values records weigh (distributions add none), by two passes; the
// number of distinct identifiers.
func (m *refModel) accumulated(k AccumulatorKind, recs []int, f *firingRec) float64 {
	if k.Name != SpreadKind.Name {
		ids := map[uint64]bool{}
		for _, i := range recs {
			if id := m.recs[i].id; id != 0 {
				ids[id] = true
			}
		}
		return float64(len(ids))
	}
	var n, sum float64
	for _, i := range recs {
		if r := &m.recs[i]; r.dist == nil && finite(r.v) {
			n += float64(r.weight())
			sum += float64(r.weight()) * r.v
			f.spreadScale = max(f.spreadScale, r.v*r.v)
		}
	}
	if n == 0 {
		return 0
	}
	mean, m2 := sum/n, 0.0
	for _, i := range recs {
		if r := &m.recs[i]; r.dist == nil && finite(r.v) {
			m2 += float64(r.weight()) * (r.v - mean) * (r.v - mean)
		}
	}
	return m2 / n
}

// weighted is a value and the records it stands for.
type weighted struct {
	v float64
	n uint64
}

// weightedRank returns the value at 0-based rank k of vals, sorted by value, each repeated n times.
func weightedRank(vals []weighted, k uint64) float64 {
	for _, x := range vals {
		if k < x.n {
			return x.v
		}
		k -= x.n
	}
	panic("model: rank beyond the values' weight")
}
