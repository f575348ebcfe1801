package stream

// A brute-force reference model of the engine's contract, and randomized tests that hold the engine to
// it.
//
// The model knows nothing of panes, shards or flush points: it keeps every accepted record, remembers
// for every window (aggregation, key, start) which records were added to it and which of them were added
// late since the previous Collect, and recomputes every result from those records at every firing. It
// is written from the contract (doc.go, verdict.go, result.go and the semantics below), not from the
// engine's code:
//
//   - A window is [start, start+size) with start a multiple of slide; a record at t is in size/slide
//     windows.
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
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/processor/clock"
)

// ---------------------------------------------------------------------------------------------------
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
	added map[refWinID]uint64  // records ever added, per window (discarded ones too)

	pending []firingRec // firings made since the last Collect

	quiet bool // keep the state only; build no results (used by the stream generator and the fuzz target)
}

func newRefModel(c *modelConfig) *refModel {
	return &refModel{
		size: int64(c.size), slide: int64(c.slideOrSize()), lateness: int64(c.lateness), ooo: int64(c.ooo),
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
	for s := t - mod(t, m.slide); s+m.size > t; s -= m.slide {
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
	m := b.m
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
	m.recs = append(m.recs, refRec{agg: agg, key: key, t: t, v: v})
	for _, s := range onTime {
		w := m.window(refWinID{agg, key, s})
		w.all = append(w.all, i)
	}
	for _, s := range late {
		w := m.window(refWinID{agg, key, s})
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

func (m *refModel) window(id refWinID) *refWin {
	m.added[id]++
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
	f.Count = uint64(len(part))
	for _, i := range part {
		if v := m.recs[i].v; finite(v) {
			f.Sum += v
			f.ValueCount++
			f.absSum += math.Abs(v)
		}
	}
	var vals []float64
	var wholeSum float64
	for _, i := range w.all {
		if v := m.recs[i].v; finite(v) {
			vals = append(vals, v)
			wholeSum += v
			f.wholeAbsSum += math.Abs(v)
		}
	}
	sort.Float64s(vals)
	f.WindowValueCount = uint64(len(vals))
	if n := len(vals); n > 0 {
		f.Avg = wholeSum / float64(n)
		f.Min, f.Max = vals[0], vals[n-1]
		for _, q := range a.Quantiles {
			f.Quantiles = append(f.Quantiles, vals[quantileIndex(q, n)])
		}
	}
	if a.Histogram {
		f.HasHist = true
		f.HistCount, f.HistSum, f.HistBuckets = f.ValueCount, f.Sum, f.ValueCount
	}
	return append(out, f)
}

// ---------------------------------------------------------------------------------------------------
// Firings, as reported by the engine or computed by the model.

type firingRec struct {
	Agg                                 int
	Key                                 string
	Overflow                            bool
	Start, End                          int64
	Late                                bool
	Count, ValueCount, WindowValueCount uint64
	Sum, Avg, Min, Max                  float64
	Quantiles                           []float64

	HasHist                bool
	HistCount, HistBuckets uint64 // HistBuckets: zero count + every bucket count
	HistSum                float64
	HistScale              int32
	HistZero               uint64
	HistPosOff, HistNegOff int32
	HistPos, HistNeg       []uint64

	absSum, wholeAbsSum float64 // model only: the scale of the sums, for their tolerance
}

type firingID struct {
	Agg      int
	Overflow bool
	Key      string
	Start    int64
	Late     bool
}

func (f *firingRec) id() firingID { return firingID{f.Agg, f.Overflow, f.Key, f.Start, f.Late} }

type windowID struct {
	Agg      int
	Overflow bool
	Key      string
	Start    int64
}

func (f *firingRec) window() windowID { return windowID{f.Agg, f.Overflow, f.Key, f.Start} }

func cmpFiringID(a, b firingID) int {
	if c := cmp.Compare(a.Agg, b.Agg); c != 0 {
		return c
	}
	if a.Overflow != b.Overflow {
		if a.Overflow {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Start, b.Start); c != 0 {
		return c
	}
	if a.Late != b.Late {
		if a.Late {
			return 1
		}
		return -1
	}
	return 0
}

func sortFirings(fs []firingRec) {
	slices.SortStableFunc(fs, func(a, b firingRec) int { return cmpFiringID(a.id(), b.id()) })
}

func firingFromResult(r *Result) firingRec { return copyFiring(r, true) }

// copyFiring copies r; with buckets the histogram's bucket counts too, for a bit-for-bit comparison,
// else only their total.
func copyFiring(r *Result, buckets bool) firingRec {
	f := firingRec{Agg: r.Agg, Key: r.Key, Overflow: r.Overflow, Start: r.Start, End: r.End, Late: r.late,
		Count: r.Count, ValueCount: r.ValueCount, WindowValueCount: r.WindowValueCount,
		Sum: r.Sum, Avg: r.Avg, Min: r.Min, Max: r.Max, Quantiles: slices.Clone(r.Quantiles)}
	if h := r.Hist; h != nil {
		f.HasHist = true
		f.HistCount, f.HistSum, f.HistScale, f.HistZero = h.Count(), h.Sum(), h.Scale(), h.ZeroCount()
		// At the sketch's own scale: its buckets as they are.
		f.HistPosOff, f.HistPos = h.AppendPositiveCountsAt(nil, h.Scale())
		f.HistNegOff, f.HistNeg = h.AppendNegativeCountsAt(nil, h.Scale())
		f.HistBuckets = f.HistZero
		for _, c := range f.HistPos {
			f.HistBuckets += c
		}
		for _, c := range f.HistNeg {
			f.HistBuckets += c
		}
		if !buckets {
			f.HistPos, f.HistNeg = nil, nil
		}
	}
	return f
}

func collectFirings(e *Engine, now int64) []firingRec { return collectFiringsOf(e, now, true) }

// collectFiringsOf is collectFirings, with the histograms' bucket counts or only their totals (see
// copyFiring).
func collectFiringsOf(e *Engine, now int64, buckets bool) []firingRec {
	var out []firingRec
	e.Collect(now, func(r *Result) { out = append(out, copyFiring(r, buckets)) })
	sortFirings(out)
	return out
}

func fireAllFirings(e *Engine) []firingRec { return fireAllFiringsOf(e, true) }

func fireAllFiringsOf(e *Engine, buckets bool) []firingRec {
	var out []firingRec
	e.FireAll(func(r *Result) { out = append(out, copyFiring(r, buckets)) })
	sortFirings(out)
	return out
}

// clock-relative formatting for messages

type timeFmt struct{ base int64 }

func (tf timeFmt) t(v int64) string {
	switch v {
	case math.MinInt64:
		return "-inf"
	case math.MaxInt64:
		return "+inf"
	}
	return fmt.Sprintf("%d(base%+v)", v, time.Duration(v-tf.base))
}

func (tf timeFmt) window(start, end int64) string {
	return fmt.Sprintf("[%v, %v)", time.Duration(start-tf.base), time.Duration(end-tf.base))
}

func (tf timeFmt) firing(f *firingRec) string {
	kind := "first"
	if f.Late {
		kind = "LATE"
	}
	key := strconv.Quote(f.Key)
	if f.Overflow {
		key = "<overflow>"
	}
	s := fmt.Sprintf("agg%d %s %s %s count=%d valueCount=%d sum=%g windowValueCount=%d",
		f.Agg, key, tf.window(f.Start, f.End), kind, f.Count, f.ValueCount, f.Sum, f.WindowValueCount)
	if f.WindowValueCount > 0 {
		s += fmt.Sprintf(" avg=%g min=%g max=%g q=%v", f.Avg, f.Min, f.Max, f.Quantiles)
	}
	if f.HasHist {
		s += fmt.Sprintf(" hist{count=%d sum=%g buckets=%d}", f.HistCount, f.HistSum, f.HistBuckets)
	}
	return s
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// compareToModel compares the engine's firings of one Collect with the model's.
func compareToModel(tf timeFmt, aggs []Aggregation, want, got []firingRec) []string {
	var out []string
	gotByID := map[firingID]*firingRec{}
	for i := range got {
		g := &got[i]
		if gotByID[g.id()] != nil {
			out = append(out, "  duplicate firing: "+tf.firing(g))
		}
		gotByID[g.id()] = g
	}
	for i := range want {
		w := &want[i]
		g := gotByID[w.id()]
		if g == nil {
			out = append(out, "  missing firing:    want "+tf.firing(w))
			continue
		}
		delete(gotByID, w.id())
		var bad []string
		check := func(ok bool, what string) {
			if !ok {
				bad = append(bad, what)
			}
		}
		check(g.End == w.End, "end")
		check(g.Count == w.Count, "count")
		check(g.ValueCount == w.ValueCount, "valueCount")
		check(g.WindowValueCount == w.WindowValueCount, "windowValueCount")
		check(within(g.Sum, w.Sum, 1e-9*w.absSum), "sum")
		if w.WindowValueCount > 0 && g.WindowValueCount == w.WindowValueCount {
			check(within(g.Avg, w.Avg, 1e-9*w.wholeAbsSum/float64(w.WindowValueCount)), "avg")
			check(g.Min == w.Min, "min")
			check(g.Max == w.Max, "max")
			if len(g.Quantiles) != len(w.Quantiles) {
				check(false, "len(quantiles)")
			} else {
				for k := range w.Quantiles {
					check(within(g.Quantiles[k], w.Quantiles[k], 0.01*math.Abs(w.Quantiles[k])),
						fmt.Sprintf("quantile %v", aggs[w.Agg].Quantiles[k]))
				}
			}
		}
		check(g.HasHist == w.HasHist, "hist presence")
		if g.HasHist && w.HasHist {
			check(g.HistCount == w.HistCount, "hist count")
			check(within(g.HistSum, w.HistSum, 1e-9*w.absSum), "hist sum")
			check(g.HistBuckets == g.HistCount, "hist bucket counts add up to its count")
		}
		if len(bad) > 0 {
			out = append(out, fmt.Sprintf("  wrong %s:\n    want %s\n    got  %s",
				strings.Join(bad, ", "), tf.firing(w), tf.firing(g)))
		}
	}
	var extra []firingRec
	for _, g := range gotByID {
		extra = append(extra, *g)
	}
	sortFirings(extra)
	for i := range extra {
		out = append(out, "  unexpected firing: got  "+tf.firing(&extra[i]))
	}
	return out
}

func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// sameFiring reports whether two firings are identical, floats bit for bit.
func sameFiring(a, b *firingRec) bool {
	return a.id() == b.id() && a.End == b.End && a.Count == b.Count && a.ValueCount == b.ValueCount &&
		a.WindowValueCount == b.WindowValueCount && sameFloat(a.Sum, b.Sum) && sameFloat(a.Avg, b.Avg) &&
		sameFloat(a.Min, b.Min) && sameFloat(a.Max, b.Max) && slices.EqualFunc(a.Quantiles, b.Quantiles, sameFloat) &&
		a.HasHist == b.HasHist && a.HistCount == b.HistCount && a.HistBuckets == b.HistBuckets &&
		sameFloat(a.HistSum, b.HistSum) && a.HistScale == b.HistScale && a.HistZero == b.HistZero &&
		a.HistPosOff == b.HistPosOff && a.HistNegOff == b.HistNegOff &&
		slices.Equal(a.HistPos, b.HistPos) && slices.Equal(a.HistNeg, b.HistNeg)
}

// compareStrict requires two engines' firings of one Collect to be identical.
func compareStrict(tf timeFmt, want, got []firingRec) []string {
	var out []string
	n := max(len(want), len(got))
	for i := range n {
		switch {
		case i >= len(got):
			out = append(out, "  missing firing:    want "+tf.firing(&want[i]))
		case i >= len(want):
			out = append(out, "  unexpected firing: got  "+tf.firing(&got[i]))
		case !sameFiring(&want[i], &got[i]):
			out = append(out, fmt.Sprintf("  differs:\n    want %+v\n    got  %+v", want[i], got[i]))
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------------------
// Configurations and streams.

type modelConfig struct {
	name                                        string
	size, slide, lateness, ooo, idle, skew      time.Duration
	aggs                                        []Aggregation
	keys                                        int
	emptyKey                                    bool  // one of the keys is ""
	base                                        int64 // wall clock at the start, Unix ns; 0: a random one in the 2020s
	seeds, ops                                  int
	maxBatch                                    int // records per batch, at most; 0: 20
	shards                                      int
	maxSeries                                   int     // 0: large (no overflow)
	snapBeforeCollectRate, snapAfterCollectRate float64 // snapshot test only

	// lead is how far event times run ahead of the wall clock at most, in the stretches where they do
	// (0: never; then they lag behind it by up to size).
	lead time.Duration
	// clockKeepsUp: every Collect is at or after the greatest accepted event time on the wall clock,
	// so that W never waits for the clock and moves only at End and Collect, never at a Begin.
	clockKeepsUp bool

	perSource  bool
	sourceIdle time.Duration
	maxSources int
	// sources is the number of sources the stream's records come from (per_source only); each lags
	// behind the wall clock by up to sourceLag more than the stream does, and at times falls silent.
	sources   int
	sourceLag time.Duration
}

func (c *modelConfig) slideOrSize() time.Duration {
	if c.slide == 0 {
		return c.size
	}
	return c.slide
}

func (c *modelConfig) engineConfig(clk clock.Clock) Config {
	aggs := slices.Clone(c.aggs)
	for i := range aggs {
		aggs[i].MaxSeries = 1 << 20
		if c.maxSeries > 0 {
			aggs[i].MaxSeries = c.maxSeries
		}
	}
	return Config{Size: c.size, Slide: c.slide, MaxOutOfOrderness: c.ooo, IdleTimeout: c.idle,
		MaxFutureSkew: c.skew, AllowedLateness: c.lateness, Aggregations: aggs, shards: c.shards, Clock: clk,
		PerSource: c.perSource, SourceIdleTimeout: c.sourceIdle, MaxSources: c.maxSources}
}

func (c *modelConfig) String() string {
	s := fmt.Sprintf("%s: size=%v slide=%v lateness=%v maxOutOfOrderness=%v idle=%v maxFutureSkew=%v aggs=%+v shards=%d maxSeries=%d",
		c.name, c.size, c.slideOrSize(), c.lateness, c.ooo, c.idle, c.skew, c.aggs, c.shards, c.maxSeries)
	if c.perSource {
		s += fmt.Sprintf(" perSource sourceIdle=%v maxSources=%d sources=%d", c.sourceIdle, c.maxSources, c.sources)
	}
	return s
}

var fullQuantiles = []float64{0.5, 0.9, 0.99, 0.999}

// realNow is a wall clock in the 2020s, so that windows, ids and the engine's internal infinities are
// exercised at realistic magnitudes.
const realNow = int64(1_700_000_000) * int64(time.Second)

func modelConfigs() []modelConfig {
	s := time.Second
	return []modelConfig{
		{name: "tumbling10s", size: 10 * s, skew: 30 * s, keys: 4, seeds: 40, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		{name: "tumbling10s-late-ooo-idle", size: 10 * s, slide: 10 * s, lateness: 5 * s, ooo: 2 * s, idle: 15 * s,
			skew: 30 * s, keys: 8, emptyKey: true, seeds: 40, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "tumbling1s-3aggs", size: s, lateness: 2 * s, ooo: s / 2, idle: 3 * s, skew: 30 * s, keys: 3,
			seeds: 40, ops: 40, shards: 1,
			aggs: []Aggregation{{Histogram: true}, {Quantiles: []float64{0, 0.25, 1}}, {}}},
		{name: "sliding4s/1s", size: 4 * s, slide: s, ooo: s, skew: 30 * s, keys: 5, seeds: 40, ops: 24,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		{name: "sliding4s/1s-late-idle-3aggs", size: 4 * s, slide: s, lateness: 2500 * time.Millisecond, idle: 5 * s,
			skew: 30 * s, keys: 12, seeds: 40, ops: 30,
			aggs: []Aggregation{{Quantiles: fullQuantiles}, {Histogram: true}, {}}},
		{name: "sliding60s/1s", size: 60 * s, slide: s, lateness: 10 * s, ooo: 5 * s, idle: 20 * s, skew: 30 * s,
			keys: 12, seeds: 8, ops: 20,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "sliding10s/2.5s-near-epoch", size: 10 * s, slide: 2500 * time.Millisecond, lateness: 5 * s,
			ooo: s, idle: 4 * s, skew: 5 * s, keys: 4, base: int64(12 * s), seeds: 40, ops: 20,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		// Many records per series and batch, out of order over a few panes: a series' head moves from
		// pane to pane, taking and putting back totals and pending values (TestFullPendingValues...
		// fills one).
		{name: "sliding4s/1s-dense", size: 4 * s, slide: s, ooo: s, skew: 30 * s, keys: 2,
			maxBatch: 300, seeds: 24, ops: 16,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "sliding40ns/10ns", size: 40, slide: 10, lateness: 25, ooo: 7, idle: 50, skew: 30, keys: 4,
			seeds: 40, ops: 24,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {Quantiles: []float64{0.5}}}},
		// Event times run ahead of the wall clock in stretches, within max_future_skew: W is held at
		// now - max_out_of_orderness and windows fire as the clock moves.
		{name: "tumbling10s-ahead", size: 10 * s, lateness: 5 * s, ooo: 2 * s, skew: 60 * s, lead: 45 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		{name: "sliding4s/1s-ahead-idle", size: 4 * s, slide: s, lateness: 2 * s, idle: 5 * s, skew: 20 * s,
			lead: 15 * s, keys: 4, seeds: 30, ops: 30,
			aggs: []Aggregation{{Quantiles: fullQuantiles}, {}}},
		// per_source: a few sources, some tens of seconds behind the others, some silent for longer
		// than source_idle_timeout at times.
		{name: "per-source", size: 10 * s, lateness: 5 * s, ooo: s, skew: 30 * s, lead: 10 * s,
			perSource: true, sourceIdle: 20 * s, maxSources: 8, sources: 4, sourceLag: 90 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "per-source-idle", size: 10 * s, slide: 5 * s, lateness: 5 * s, idle: 15 * s, skew: 30 * s, lead: 10 * s,
			perSource: true, sourceIdle: 30 * s, maxSources: 16, sources: 4, sourceLag: 60 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		// More sources than max_sources: the ones past it count in the shared source.
		{name: "per-source-max2", size: 10 * s, lateness: 5 * s, ooo: 2 * s, skew: 30 * s, lead: 5 * s,
			perSource: true, sourceIdle: 20 * s, maxSources: 2, sources: 5, sourceLag: 60 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Histogram: true}, {}}},
	}
}

type scenOp struct {
	batchNow, collectNow int64
	recs                 []refRec
	snapBeforeCollect    bool // snapshot test: Snapshot and Restore between End and Collect
	snapAfterCollect     bool // snapshot test: Snapshot and Restore after Collect
	// restoreAt is the wall time of the Restore after Collect, at or after collectNow: the collector
	// was not running in between.
	restoreAt int64
}

type scenario struct {
	cfg  *modelConfig
	seed uint64
	base int64
	ops  []scenOp
}

func (sc *scenario) withOps(ops []scenOp) *scenario {
	c := *sc
	c.ops = ops
	return &c
}

func (sc *scenario) records() int {
	n := 0
	for _, op := range sc.ops {
		n += len(op.recs)
	}
	return n
}

func randIn(rng *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + rng.Int64N(hi-lo+1)
}

func hashName(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// genValue draws a value: mostly log-uniform over [1e-3, 3.6e6], with NaN, infinities, zero, negatives
// and repeats.
func genValue(rng *rand.Rand, prev []float64, nanPct int) float64 {
	r := rng.IntN(100)
	switch {
	case r < nanPct:
		return math.NaN()
	case r < nanPct+1:
		return math.Inf(1)
	case r < nanPct+2:
		return math.Inf(-1)
	case r < nanPct+4:
		return 0
	case r < nanPct+7:
		return -math.Exp(math.Log(1e-3) + rng.Float64()*(math.Log(3.6e6)-math.Log(1e-3)))
	case r < nanPct+12 && len(prev) > 0:
		return prev[rng.IntN(len(prev))]
	}
	return math.Exp(math.Log(1e-3) + rng.Float64()*(math.Log(3.6e6)-math.Log(1e-3)))
}

// genScenario draws a stream for c. It runs a quiet model alongside to aim records at the watermark:
// late ones, too-late ones, ones on window boundaries.
func genScenario(c *modelConfig, seed uint64) *scenario {
	rng := rand.New(rand.NewPCG(seed, hashName(c.name)))
	m := newRefModel(c)
	m.quiet = true
	size, slide, late, ooo, idle, skew := int64(c.size), int64(c.slideOrSize()), int64(c.lateness), int64(c.ooo), int64(c.idle), int64(c.skew)
	base := c.base
	if base == 0 {
		base = realNow + randIn(rng, 0, 1000)*int64(time.Second) + randIn(rng, 0, 3)*slide/3
	}
	sc := &scenario{cfg: c, seed: seed, base: base}
	keys := make([]string, c.keys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		// Keys around the length a series holds in itself: at it, and one byte and more beyond.
		switch i % 4 {
		case 2:
			keys[i] += strings.Repeat(".", inlineKeyLen-len(keys[i]))
		case 3:
			keys[i] += strings.Repeat("-", inlineKeyLen+1-len(keys[i])+i%7)
		}
	}
	if c.emptyKey {
		keys[0] = ""
	}
	now := base
	// lag is how far the stream's event times are behind the wall clock; negative: ahead of it.
	drawLag := func() int64 {
		if c.lead > 0 && rng.IntN(2) == 0 {
			return -randIn(rng, 1, int64(c.lead))
		}
		return randIn(rng, 0, size)
	}
	lag := drawLag()
	redraw := 40
	if c.lead > 0 {
		redraw = 6 // switch between running behind and ahead of the clock within a stream
	}
	nanPct := 5 + rng.IntN(10)
	var prev []float64
	// With per_source: each source's lag behind the stream, and the wall time it is silent until.
	srcNames := make([]string, c.sources)
	srcLag := make([]int64, c.sources)
	silentUntil := make([]int64, c.sources)
	drawSrcLag := func(i int) int64 {
		if i == 0 || rng.IntN(2) == 0 {
			return randIn(rng, 0, int64(time.Second))
		}
		return randIn(rng, 10*int64(time.Second), int64(c.sourceLag))
	}
	for i := range srcNames {
		srcNames[i] = "s" + strconv.Itoa(i)
		srcLag[i] = drawSrcLag(i)
	}
	nOps := c.ops/2 + rng.IntN(c.ops)
	for range nOps {
		// advance the wall clock
		switch r := rng.IntN(100); {
		case r < 15:
		case r < 80:
			now += randIn(rng, 1, 2*slide)
		case r < 92:
			now += randIn(rng, size, 3*size)
		case idle > 0:
			now += randIn(rng, idle, 2*idle)
		default:
			now += randIn(rng, 0, 5*size)
		}
		if rng.IntN(redraw) == 0 {
			lag = drawLag()
		}
		var active []int // the sources not silent now
		for i := range srcNames {
			if rng.IntN(20) == 0 {
				srcLag[i] = drawSrcLag(i)
			}
			if rng.IntN(25) == 0 { // silent for about source_idle_timeout, often longer
				silentUntil[i] = now + randIn(rng, int64(c.sourceIdle)/2, 3*int64(c.sourceIdle))
			}
			if silentUntil[i] <= now {
				active = append(active, i)
			}
		}
		op := scenOp{batchNow: now}
		n := 1 + rng.IntN(cmp.Or(c.maxBatch, 20))
		if rng.IntN(20) == 0 || (c.sources > 0 && len(active) == 0) {
			n = 0
		}
		b := m.begin(now)
		streamFrontier := now - lag
		if b.wSet && b.w-slide > streamFrontier { // W is ahead of the stream: keep most records relevant
			streamFrontier = b.w - slide
		}
		for range n {
			frontier, src := streamFrontier, ""
			if c.sources > 0 {
				i := active[rng.IntN(len(active))]
				frontier, src = streamFrontier-srcLag[i], srcNames[i]
				b.source(src)
			}
			var t int64
			anchor := frontier
			if b.wSet {
				anchor = b.w
			}
			switch r := rng.IntN(100); {
			case r < 50: // around the frontier, out of order within max_out_of_orderness and a bit more
				t = frontier + randIn(rng, -ooo-slide, slide)
			case r < 65: // around W: on time, late or too late
				t = anchor + randIn(rng, -(size+late+2*slide), ooo+slide/2)
			case r < 77: // on a window boundary, or one that End will turn into W
				s := anchor - mod(anchor, slide) + randIn(rng, -(size+late)/slide-1, 1)*slide
				if rng.IntN(2) == 0 {
					s += ooo
				}
				t = s + randIn(rng, -1, 1)
			case r < 82: // the future, or just not
				t = now + skew + randIn(rng, 0, 2)
				if rng.IntN(2) == 0 {
					t = now + skew + randIn(rng, 1, slide)
				}
			case r < 85: // invalid
				t = -randIn(rng, 0, 2)
			case r < 90: // long expired
				t = anchor - size - late - randIn(rng, 0, 3*size)
			case r < 91: // ahead of the wall clock, within the skew: W follows the clock up to it
				t = now + randIn(rng, 0, min(skew, 3*size))
			default: // near the frontier, exact multiples of the slide
				t = frontier - mod(frontier, slide) + randIn(rng, -2, 1)*slide
			}
			agg := rng.IntN(len(c.aggs))
			key := keys[min(rng.IntN(len(keys)), rng.IntN(len(keys)))]
			v := genValue(rng, prev, nanPct)
			if finite(v) {
				prev = append(prev, v)
			}
			b.add(agg, key, t, v)
			op.recs = append(op.recs, refRec{agg: agg, key: key, t: t, v: v, src: src})
		}
		b.end()
		// the Collect after the batch, sometimes later on the wall clock
		op.collectNow = now
		switch r := rng.IntN(100); {
		case r < 70:
		case r < 82:
			op.collectNow += randIn(rng, 1, slide)
		case r < 92 && idle > 0 && m.idleArmed:
			// aim the idle rule at a window end or expiry boundary, give or take 1 ns
			target := m.wLast - mod(m.wLast, slide) + randIn(rng, 1, 3)*slide + randIn(rng, -1, 1)
			if rng.IntN(2) == 0 {
				target += late
			}
			at := m.lastAcceptWall + (target - m.wLast)
			if at >= now && at-m.lastAcceptWall >= idle {
				op.collectNow = at
			}
		default:
			if idle > 0 {
				op.collectNow += randIn(rng, idle/2, 2*idle)
			} else {
				op.collectNow += randIn(rng, 0, size)
			}
		}
		if c.clockKeepsUp && m.anyAccepted {
			op.collectNow = max(op.collectNow, m.maxEver)
		}
		m.collect(op.collectNow)
		now = op.collectNow
		op.snapBeforeCollect = rng.Float64() < c.snapBeforeCollectRate
		op.snapAfterCollect = rng.Float64() < c.snapAfterCollectRate
		if op.snapAfterCollect {
			// Sometimes the collector is down for a while before the Restore.
			op.restoreAt = now
			if rng.IntN(2) == 0 {
				op.restoreAt += randIn(rng, 1, 2*max(idle, int64(c.sourceIdle), size))
			}
			m.snapshot(now)
			m.restore(op.restoreAt)
			now = op.restoreAt
		}
		sc.ops = append(sc.ops, op)
	}
	return sc
}

// ---------------------------------------------------------------------------------------------------
// Running a stream against the engine.

type runFailure struct {
	op    int // the op at which the first mismatch showed; len(ops) for FireAll and the final accounting
	final bool
	lines []string
}

func (f *runFailure) String() string {
	if f.final {
		return fmt.Sprintf("at the final FireAll and accounting:\n%s", strings.Join(f.lines, "\n"))
	}
	return fmt.Sprintf("at op %d:\n%s", f.op, strings.Join(f.lines, "\n"))
}

type runOptions struct {
	snapshots bool            // honour the ops' snapshot flags; compare firings with an uninterrupted engine
	staged    bool            // stage each batch and Apply it, instead of one record at a time
	trace     *[]string       // if set, gets a line per step
	onEngine  func(e *Engine) // called after each op with the engine under test
}

func newModelEngine(c *modelConfig, now int64) (*Engine, *clock.Fake) {
	clk := clock.NewFake(time.Unix(0, now))
	e, err := New(c.engineConfig(clk))
	if err != nil {
		panic(err)
	}
	return e, clk
}

// snapshotAndRestore restores a snapshot of e, taken at its clock's time, into a fresh engine whose
// clock reads restoreAt, with another shard count (which a snapshot does not fix) every other time.
func snapshotAndRestore(c *modelConfig, e *Engine, restoreAt int64) (*Engine, *clock.Fake, error) {
	snap := e.Snapshot(nil)
	c2 := *c
	c2.shards = []int{1, 0, 3, 64}[restores.Add(1)%4]
	e2, clk := newModelEngine(&c2, restoreAt)
	if err := e2.Restore(snap); err != nil {
		return nil, nil, fmt.Errorf("Restore of a %d-byte snapshot: %w", len(snap), err)
	}
	clear(snap) // the restored engine must hold nothing of the snapshot's bytes
	return e2, clk, nil
}

var restores atomic.Int64 // spreads the shard counts of restored engines

// newSource reports whether record j of recs comes from another source than the one before it: where
// a batch names the source of the records that follow.
func newSource(recs []refRec, j int) bool { return j == 0 || recs[j].src != recs[j-1].src }

// runScenario drives the engine and the model through sc and returns the first mismatch, or nil.
//
// With opt.snapshots the engine is snapshotted and restored at the ops' marks, and held to the model
// and, bit for bit, to an engine that runs the stream uninterrupted (ref). A restore starts the idle
// rule's and the sources' silences afresh (the collector was not running), so the two engines can part:
// mU, the model of the uninterrupted engine, tells when W first differs, and from then on only the
// model counts.
func runScenario(sc *scenario, opt runOptions) *runFailure {
	c := sc.cfg
	tf := timeFmt{sc.base}
	e, clk := newModelEngine(c, sc.base)
	var ref *Engine
	var refClk *clock.Fake
	var mU *refModel
	if opt.snapshots {
		ref, refClk = newModelEngine(c, sc.base)
		mU = newRefModel(c)
		mU.quiet = true
	}
	m := newRefModel(c)
	trace := func(format string, args ...any) {
		if opt.trace != nil {
			*opt.trace = append(*opt.trace, fmt.Sprintf(format, args...))
		}
	}
	part := func(when string) {
		if ref != nil && mU.watermark() != m.watermark() {
			trace("  %s: W %s restored, %s uninterrupted: the uninterrupted engine no longer counts",
				when, tf.t(m.watermark()), tf.t(mU.watermark()))
			ref = nil
		}
	}
	totals := map[windowID]uint64{}
	var tally [numVerdicts]uint64
	var firsts, lates uint64
	account := func(fs []firingRec) {
		for i := range fs {
			totals[fs[i].window()] += fs[i].Count
			if fs[i].Late {
				lates++
			} else {
				firsts++
			}
		}
	}
	compare := func(want, got, refGot []firingRec, withRef bool) []string {
		out := compareToModel(tf, c.aggs, want, got)
		if withRef {
			out = append(out, compareStrict(tf, refGot, got)...)
		}
		return out
	}
	traceFirings := func(what string, want, got []firingRec) {
		if opt.trace == nil {
			return
		}
		for i := range want {
			trace("    model  %s: %s", what, tf.firing(&want[i]))
		}
		for i := range got {
			trace("    engine %s: %s", what, tf.firing(&got[i]))
		}
	}
	var key []byte // the key buffer given to stage, scribbled on after each record: the engine must copy it
	for i, op := range sc.ops {
		var lines []string
		clk.Set(time.Unix(0, op.batchNow))
		b := e.Begin(op.batchNow)
		mb := m.begin(op.batchNow)
		if opt.trace != nil {
			trace("op %d: batch at wall %s, W at Begin %s", i, tf.t(op.batchNow), tf.t(mb.watermarkOrInf()))
		}
		var rb *Batch
		var ub *refBatch
		if mU != nil {
			ub = mU.begin(op.batchNow)
			part("at Begin")
		}
		if ref != nil {
			refClk.Set(time.Unix(0, op.batchNow))
			rb = ref.Begin(op.batchNow)
		}
		// With opt.staged every record is staged and the batch applied at the end, so a verdict is
		// known only then: engineVerdicts holds them by record. engineShared holds what SetSource
		// said where the source changes.
		engineVerdicts := make([]Verdict, len(op.recs))
		engineShared := make([]bool, len(op.recs))
		if opt.staged {
			for j, r := range op.recs {
				if c.perSource && newSource(op.recs, j) {
					engineShared[j] = b.SetSource([]byte(r.src))
				}
				key = append(key[:0], r.key...)
				engineVerdicts[j] = b.stage(r.agg, key, r.t, r.v, int32(j))
				for k := range key {
					key[k] = '#'
				}
			}
			b.Apply(func(tag int32, vd Verdict, _ int64) {
				if engineVerdicts[tag] != OnTime {
					panic(fmt.Sprintf("Apply reported record %d twice or after stage refused it", tag))
				}
				engineVerdicts[tag] = vd
			})
		}
		for j, r := range op.recs {
			if c.perSource && newSource(op.recs, j) {
				if !opt.staged {
					engineShared[j] = b.SetSource([]byte(r.src))
				}
				want := mb.source(r.src)
				if ub != nil {
					ub.source(r.src)
				}
				if rb != nil {
					rb.SetSource([]byte(r.src))
				}
				if opt.trace != nil {
					trace("  source %q: model shared=%v, engine shared=%v", r.src, want, engineShared[j])
				}
				if engineShared[j] != want {
					lines = append(lines, fmt.Sprintf("  record %d: SetSource(%q) reported shared=%v, want %v", j, r.src, engineShared[j], want))
				}
			}
			var got Verdict
			if opt.staged {
				got = engineVerdicts[j]
			} else {
				key = append(key[:0], r.key...)
				got = addOne(b, r.agg, key, r.t, r.v)
				for k := range key {
					key[k] = '#'
				}
			}
			want := mb.add(r.agg, r.key, r.t, r.v)
			if ub != nil {
				ub.add(r.agg, r.key, r.t, r.v)
			}
			if got < numVerdicts {
				tally[got]++
			}
			if opt.trace != nil {
				trace("  rec %d: agg%d key=%q t=%s v=%g -> model %v, engine %v", j, r.agg, r.key, tf.t(r.t), r.v, want, got)
			}
			if got != want {
				var fates []string
				if r.t > 0 && r.t <= op.batchNow+m.skew {
					for _, s := range m.windowStarts(r.t) {
						fates = append(fates, fmt.Sprintf("%s:%v", tf.window(s, s+m.size), mb.windowFate(s)))
					}
				}
				lines = append(lines, fmt.Sprintf("  record %d (agg%d key=%q t=%s v=%g): verdict %v, want %v (W at Begin %s; windows %s)",
					j, r.agg, r.key, tf.t(r.t), r.v, got, want, tf.t(mb.watermarkOrInf()), strings.Join(fates, " ")))
			}
			if rb != nil {
				if rv := addOne(rb, r.agg, []byte(r.key), r.t, r.v); rv != got {
					lines = append(lines, fmt.Sprintf("  record %d: verdict %v, the uninterrupted engine said %v", j, got, rv))
				}
			}
		}
		b.End()
		mb.end()
		if ub != nil {
			ub.end()
			part("after End")
		}
		if rb != nil {
			rb.End()
		}
		if got, want := e.Watermark(), m.watermarkAt(op.batchNow); got != want {
			lines = append(lines, fmt.Sprintf("  after End: Watermark() = %s, want %s", tf.t(got), tf.t(want)))
		}
		if opt.snapshots && op.snapBeforeCollect {
			var err error
			m.snapshot(op.batchNow)
			if e, clk, err = snapshotAndRestore(c, e, op.batchNow); err != nil {
				lines = append(lines, "  "+err.Error())
				return &runFailure{op: i, lines: lines}
			}
			m.restore(op.batchNow)
			trace("  snapshot + restore before Collect")
		}
		clk.Set(time.Unix(0, op.collectNow))
		got := collectFiringsOf(e, op.collectNow, opt.snapshots)
		want := m.collect(op.collectNow)
		if mU != nil {
			mU.collect(op.collectNow)
			part("at Collect")
		}
		var refGot []firingRec
		withRef := ref != nil
		if ref != nil {
			refClk.Set(time.Unix(0, op.collectNow))
			refGot = collectFirings(ref, op.collectNow)
		}
		account(got)
		if opt.trace != nil {
			trace("  collect at wall %s: W model %s, engine %s", tf.t(op.collectNow), tf.t(m.watermark()), tf.t(e.Watermark()))
		}
		traceFirings("fired", want, got)
		if gw, ww := e.Watermark(), m.watermarkAt(op.collectNow); gw != ww {
			lines = append(lines, fmt.Sprintf("  after Collect(%s): Watermark() = %s, want %s", tf.t(op.collectNow), tf.t(gw), tf.t(ww)))
		}
		lines = append(lines, compare(want, got, refGot, withRef)...)
		if opt.snapshots && op.snapAfterCollect {
			restoreAt := max(op.restoreAt, op.collectNow)
			var err error
			m.snapshot(op.collectNow)
			if e, clk, err = snapshotAndRestore(c, e, restoreAt); err != nil {
				lines = append(lines, "  "+err.Error())
				return &runFailure{op: i, lines: lines}
			}
			m.restore(restoreAt)
			if opt.trace != nil {
				trace("  snapshot + restore after Collect, restored at wall %s", tf.t(restoreAt))
			}
		}
		if opt.onEngine != nil && e != nil {
			opt.onEngine(e)
		}
		if len(lines) > 0 {
			return &runFailure{op: i, lines: lines}
		}
	}
	// FireAll, then the accounting of every window.
	var lines []string
	got := fireAllFiringsOf(e, opt.snapshots)
	want := m.fireAll()
	var refGot []firingRec
	withRef := ref != nil
	if ref != nil {
		refGot = fireAllFirings(ref)
	}
	account(got)
	trace("FireAll")
	traceFirings("FireAll", want, got)
	if d := compare(want, got, refGot, withRef); len(d) > 0 {
		lines = append(lines, "  FireAll:")
		lines = append(lines, d...)
	}
	for id, n := range m.added {
		if g := totals[windowID{id.agg, false, id.key, id.start}]; g != n {
			lines = append(lines, fmt.Sprintf("  accounting: window agg%d %q %s: firings carried %d records in all, %d were added",
				id.agg, id.key, tf.window(id.start, id.start+m.size), g, n))
		}
	}
	for id, n := range totals {
		if id.Overflow || m.added[refWinID{id.Agg, id.Key, id.Start}] == 0 {
			lines = append(lines, fmt.Sprintf("  accounting: window agg%d %q overflow=%v %s: firings carried %d records, none was added",
				id.Agg, id.Key, id.Overflow, tf.window(id.Start, id.Start+m.size), n))
		}
	}
	if !opt.snapshots {
		st := e.Stats()
		if st.verdicts != tally {
			lines = append(lines, fmt.Sprintf("  Stats().verdicts = %v, the Adds returned %v", st.verdicts, tally))
		}
		if st.WindowsFired != firsts || st.LateFirings != lates {
			lines = append(lines, fmt.Sprintf("  Stats() WindowsFired=%d LateFirings=%d, handed out %d first and %d late firings",
				st.WindowsFired, st.LateFirings, firsts, lates))
		}
		for a, n := range st.ActiveSeries {
			if n != 0 {
				lines = append(lines, fmt.Sprintf("  after FireAll: Stats().ActiveSeries[%d] = %d, want 0", a, n))
			}
		}
	}
	if len(lines) > 0 {
		return &runFailure{op: len(sc.ops), final: true, lines: lines}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------------
// Shrinking a failing stream.

// ddmin removes as many of n items as it can while fails(keep) holds, by halving chunk sizes.
func ddmin(n int, fails func(keep []bool) bool, budget *int) []bool {
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = true
	}
	for chunk := max(n/2, 1); chunk >= 1; chunk /= 2 {
		for start := 0; start < n && *budget > 0; start += chunk {
			try := slices.Clone(keep)
			changed := false
			for i := start; i < min(start+chunk, n); i++ {
				changed = changed || try[i]
				try[i] = false
			}
			if !changed {
				continue
			}
			*budget--
			if fails(try) {
				keep = try
			}
		}
		if chunk == 1 {
			break
		}
	}
	return keep
}

func shrinkScenario(sc *scenario, opt runOptions) *scenario {
	fails := func(s *scenario) bool { return runScenario(s, opt) != nil }
	f := runScenario(sc, opt)
	if f == nil {
		return sc
	}
	cur := sc
	if f.op < len(cur.ops) {
		cur = cur.withOps(slices.Clone(cur.ops[:f.op+1]))
	}
	budget := 4000
	for round := 0; round < 4 && budget > 0; round++ {
		before := fmt.Sprint(len(cur.ops), cur.records())
		// drop ops
		keep := ddmin(len(cur.ops), func(keep []bool) bool {
			var ops []scenOp
			for i, k := range keep {
				if k {
					ops = append(ops, cur.ops[i])
				}
			}
			return fails(cur.withOps(ops))
		}, &budget)
		var ops []scenOp
		for i, k := range keep {
			if k {
				ops = append(ops, cur.ops[i])
			}
		}
		cur = cur.withOps(ops)
		// drop records
		type ref struct{ op, rec int }
		var all []ref
		for i, op := range cur.ops {
			for j := range op.recs {
				all = append(all, ref{i, j})
			}
		}
		build := func(keep []bool) *scenario {
			ops := make([]scenOp, len(cur.ops))
			for i, op := range cur.ops {
				ops[i] = op
				ops[i].recs = nil
			}
			for k, r := range all {
				if keep[k] {
					ops[r.op].recs = append(ops[r.op].recs, cur.ops[r.op].recs[r.rec])
				}
			}
			return cur.withOps(ops)
		}
		cur = build(ddmin(len(all), func(keep []bool) bool { return fails(build(keep)) }, &budget))
		// simplify: Collect at the batch's wall time, no snapshots
		for i := range cur.ops {
			for _, edit := range []func(op *scenOp){
				func(op *scenOp) { op.collectNow = op.batchNow },
				func(op *scenOp) { op.snapBeforeCollect = false },
				func(op *scenOp) { op.snapAfterCollect = false },
				func(op *scenOp) { op.restoreAt = min(op.restoreAt, op.collectNow) },
			} {
				ops := slices.Clone(cur.ops)
				edit(&ops[i])
				if budget--; fmt.Sprintf("%+v", ops[i]) != fmt.Sprintf("%+v", cur.ops[i]) && fails(cur.withOps(ops)) {
					cur = cur.withOps(ops)
				}
			}
		}
		if fmt.Sprint(len(cur.ops), cur.records()) == before {
			break
		}
	}
	return cur
}

// describeScenario prints a stream as Go-like data, with times relative to its base.
func describeScenario(sc *scenario) string {
	var b strings.Builder
	tf := timeFmt{sc.base}
	fmt.Fprintf(&b, "config %s\nseed %d, base wall clock %d\n", sc.cfg, sc.seed, sc.base)
	for i, op := range sc.ops {
		fmt.Fprintf(&b, "op %d: Begin(base%+v)", i, time.Duration(op.batchNow-sc.base))
		for j, r := range op.recs {
			if sc.cfg.perSource && newSource(op.recs, j) {
				fmt.Fprintf(&b, " SetSource(%q)", r.src)
			}
			fmt.Fprintf(&b, " record(%d, %q, %s, %g)", r.agg, r.key, tf.t(r.t), r.v)
		}
		fmt.Fprintf(&b, " End()")
		if op.snapBeforeCollect {
			b.WriteString(" Snapshot+Restore")
		}
		fmt.Fprintf(&b, " Collect(base%+v)", time.Duration(op.collectNow-sc.base))
		if op.snapAfterCollect {
			fmt.Fprintf(&b, " Snapshot+Restore(base%+v)", time.Duration(max(op.restoreAt, op.collectNow)-sc.base))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// reportFailure shrinks sc and writes the minimal stream, its full trace and the mismatch.
func reportFailure(t *testing.T, sc *scenario, opt runOptions, f *runFailure) {
	t.Helper()
	small := shrinkScenario(sc, opt)
	sf := runScenario(small, opt)
	var trace []string
	topt := opt
	topt.trace = &trace
	runScenario(small, topt)
	if sf == nil { // should not happen: the shrinker keeps a failing stream
		small, sf = sc, f
	}
	t.Errorf("%s seed %d: engine and model disagree %s\n\nminimal failing stream (%d ops, %d records, shrunk from %d ops, %d records):\n%s\nits mismatch %s\n\ntrace:\n%s",
		sc.cfg.name, sc.seed, f, len(small.ops), small.records(), len(sc.ops), sc.records(),
		describeScenario(small), sf, strings.Join(trace, "\n"))
}

func seedsFor(c *modelConfig) int {
	if s := os.Getenv("STREAM_MODEL_SEEDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	if testing.Short() {
		return max(c.seeds/5, 1)
	}
	return c.seeds
}

// scenarios holds streams drawn once for two runs: TestEngineMatchesReferenceModel and
// TestStagedBatchesMatchReferenceModel run the same ones; the second run takes it out.
var scenarios sync.Map

// sharedScenario returns genScenario(c, seed), drawn once for two callers when share is set.
func sharedScenario(c *modelConfig, seed uint64, share bool) *scenario {
	if !share {
		return genScenario(c, seed)
	}
	k := fmt.Sprintf("%s/%d", c.name, seed)
	if sc, ok := scenarios.LoadAndDelete(k); ok {
		return sc.(*scenario)
	}
	sc := genScenario(c, seed)
	scenarios.Store(k, sc)
	return sc
}

// runSeeds runs every seed of c with opt, reports the first failing one in full and the rest briefly.
func runSeeds(t *testing.T, c *modelConfig, opt runOptions) {
	only := os.Getenv("STREAM_MODEL_ONLY")
	var failed []uint64
	for s := range seedsFor(c) {
		seed := uint64(s)
		if only != "" && only != fmt.Sprintf("%s:%d", c.name, seed) {
			continue
		}
		sc := sharedScenario(c, seed, !opt.snapshots)
		if only != "" {
			var trace []string
			o := opt
			o.trace = &trace
			f := runScenario(sc, o)
			t.Logf("%s\n%s\nresult: %v", describeScenario(sc), strings.Join(trace, "\n"), f)
		}
		f := runScenario(sc, opt)
		if f == nil {
			continue
		}
		failed = append(failed, seed)
		switch {
		case len(failed) == 1:
			reportFailure(t, sc, opt, f)
		case len(failed) <= 4:
			t.Errorf("%s seed %d also fails %s", c.name, seed, f)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%s: %d of %d seeds failed: %v (rerun one with STREAM_MODEL_ONLY=%s:%d)",
			c.name, len(failed), seedsFor(c), failed, c.name, failed[0])
	}
}

// ---------------------------------------------------------------------------------------------------
// The tests.

func TestEngineMatchesReferenceModel(t *testing.T) {
	for _, c := range modelConfigs() {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			runSeeds(t, &c, runOptions{})
		})
	}
}

// TestStagedBatchesMatchReferenceModel runs the same scenarios with every batch staged and applied at
// once (the component's path), which groups its records by shard.
func TestStagedBatchesMatchReferenceModel(t *testing.T) {
	for _, c := range modelConfigs() {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			runSeeds(t, &c, runOptions{staged: true})
		})
	}
}

// TestReferenceModelSelfCheck pins the model to a few hand-computed cases, so that a wrong model cannot
// pass silently against a wrong engine.
func TestReferenceModelSelfCheck(t *testing.T) {
	s := int64(time.Second)
	c := &modelConfig{size: 30 * time.Second, slide: 10 * time.Second, lateness: 10 * time.Second,
		skew: time.Minute, aggs: []Aggregation{{Quantiles: []float64{0.5}}}}
	m := newRefModel(c)
	now := int64(1000 * s)
	b := m.begin(now)
	if v := b.add(0, "a", 25*s, 1); v != OnTime {
		t.Fatalf("first record: %v", v)
	}
	b.end()
	if m.watermark() != 25*s {
		t.Fatalf("W = %d", m.watermark())
	}
	if got := m.collect(now); len(got) != 0 {
		t.Fatalf("fired at W=25s: %+v", got)
	}
	b = m.begin(now)
	b.add(0, "a", 45*s, 3) // W = 45: windows ending 30 and 40 fire; end 30 expires (30+10 <= 45)
	b.end()
	got := m.collect(now)
	if len(got) != 2 || got[0].End != 30*s || got[1].End != 40*s || got[0].Count != 1 || got[1].Count != 1 || got[1].Late {
		t.Fatalf("firings at W=45: %+v", got)
	}
	b = m.begin(now)
	// t=25 is in windows ending 30 (expired), 40 (fired, live until 50) and 50 (not fired): late.
	if v := b.add(0, "a", 25*s, 5); v != LateUpdate {
		t.Fatalf("late record: %v", v)
	}
	if v := b.add(0, "a", 5*s, 5); v != Expired { // windows ending 10, 20, 30: all expired
		t.Fatalf("expired record: %v", v)
	}
	if v := b.add(0, "a", 0, 5); v != Invalid {
		t.Fatalf("t=0: %v", v)
	}
	if v := b.add(0, "a", now+time.Minute.Nanoseconds()+1, 5); v != Future {
		t.Fatalf("future: %v", v)
	}
	b.end()
	got = m.collect(now)
	// window [10,40): late firing, delta count 1 sum 5, whole {1,5}: avg 3, p50 rank floor(0.5) = 0 -> 1.
	if len(got) != 1 || !got[0].Late || got[0].Start != 10*s || got[0].Count != 1 || got[0].Sum != 5 ||
		got[0].WindowValueCount != 2 || got[0].Avg != 3 || got[0].Min != 1 || got[0].Max != 5 || got[0].Quantiles[0] != 1 {
		t.Fatalf("late firing: %+v", got)
	}
	all := m.fireAll()
	// left: [20,50) {25, 45, 25}, [30,60) {45}, [40,70) {45}; never fired.
	if len(all) != 3 || all[0].Count != 3 || all[0].Late || all[1].Count != 1 || all[2].Count != 1 {
		t.Fatalf("FireAll: %+v", all)
	}
	// idle rule
	c2 := &modelConfig{size: 10 * time.Second, idle: 10 * time.Second, ooo: 2 * time.Second, skew: time.Minute, aggs: []Aggregation{{}}}
	m = newRefModel(c2)
	b = m.begin(now)
	b.add(0, "a", 5*s, 1)
	b.end() // W = 3
	m.collect(now + 9*s)
	if m.watermark() != 3*s {
		t.Fatalf("idle too early: W=%d", m.watermark())
	}
	if got := m.collect(now + 11*s); len(got) != 1 || m.watermark() != 14*s {
		t.Fatalf("idle: W=%d, %+v", m.watermark(), got)
	}
	// restart: the idle rule counts from the restore and advances from the restored W
	b = m.begin(now + 20*s)
	b.add(0, "a", now+15*s, 1)
	b.end() // W = 1013
	m.snapshot(now + 20*s)
	m.restore(now + 120*s)
	if m.collect(now + 125*s); m.watermark() != now+13*s {
		t.Fatalf("idle after a restart, 5 s after it: W=%d, want %d", m.watermark(), now+13*s)
	}
	if m.collect(now + 132*s); m.watermark() != now+25*s { // 1013 + 12
		t.Fatalf("idle after a restart, 12 s after it: W=%d, want %d", m.watermark(), now+25*s)
	}

	// the clamp: a record 2 minutes ahead of the clock holds W at the clock
	c3 := &modelConfig{size: 10 * time.Second, ooo: 2 * time.Second, skew: 5 * time.Minute, aggs: []Aggregation{{}}}
	m = newRefModel(c3)
	b = m.begin(now)
	if v := b.add(0, "a", now+125*s, 1); v != OnTime {
		t.Fatalf("record ahead of the clock: %v", v)
	}
	b.end()
	if m.watermark() != now-2*s {
		t.Fatalf("clamp: W=%d, want %d", m.watermark(), now-2*s)
	}
	if m.collect(now + 50*s); m.watermark() != now+48*s {
		t.Fatalf("clamp 50 s on: W=%d, want %d", m.watermark(), now+48*s)
	}
	b = m.begin(now + 140*s)
	b.add(0, "a", now+134*s, 1)
	b.end() // W = min(1134, 1140) - 2 = 1132: [1120, 1130) fires
	if got := m.collect(now + 140*s); m.watermark() != now+132*s || len(got) != 1 || got[0].Start != now+120*s || got[0].Count != 1 {
		t.Fatalf("clamp at 1140 s: W=%d, %+v", m.watermark(), got)
	}

	// per_source: a source 90 s behind holds W until it has been silent for source_idle_timeout
	c4 := &modelConfig{size: 10 * time.Second, skew: time.Minute, perSource: true, sourceIdle: 30 * time.Second,
		maxSources: 4, aggs: []Aggregation{{}}}
	m = newRefModel(c4)
	b = m.begin(now)
	b.source("a")
	b.add(0, "k", now, 1)
	b.source("b")
	b.add(0, "k", now-90*s, 1)
	b.end()
	if m.watermark() != now-90*s {
		t.Fatalf("per_source: W=%d, want %d", m.watermark(), now-90*s)
	}
	b = m.begin(now + 10*s)
	b.source("a")
	b.add(0, "k", now+10*s, 1)
	b.end()
	if m.collect(now + 29*s); m.watermark() != now-90*s {
		t.Fatalf("per_source, b silent for 29 s: W=%d, want %d", m.watermark(), now-90*s)
	}
	if m.collect(now + 30*s); m.watermark() != now+10*s {
		t.Fatalf("per_source, b silent for 30 s: W=%d, want %d", m.watermark(), now+10*s)
	}
	// A restart: both held sources count as heard from at the restore.
	b = m.begin(now + 31*s)
	b.source("b")
	b.add(0, "k", now+20*s, 1) // b again, 11 s behind
	b.end()
	m.snapshot(now + 31*s)
	m.restore(now + 200*s)
	b = m.begin(now + 210*s)
	b.source("a")
	b.add(0, "k", now+210*s, 1)
	b.end()
	if m.collect(now + 229*s); m.watermark() != now+20*s {
		t.Fatalf("per_source after a restart: W=%d, want %d (b held since the restore)", m.watermark(), now+20*s)
	}
	if m.collect(now + 230*s); m.watermark() != now+210*s {
		t.Fatalf("per_source after a restart, b silent for 30 s: W=%d, want %d", m.watermark(), now+210*s)
	}

	// max_sources 1: b and c share a source, whose event time is the greater of theirs
	c5 := *c4
	c5.maxSources = 1
	m = newRefModel(&c5)
	b = m.begin(now)
	if b.source("a") || !b.source("b") {
		t.Fatal("max_sources 1: a has a place of its own, b shares")
	}
	b.add(0, "k", now-50*s, 1)
	b.source("c")
	b.add(0, "k", now-10*s, 1)
	b.source("a")
	b.add(0, "k", now, 1)
	b.end()
	if m.watermark() != now-10*s {
		t.Fatalf("shared source: W=%d, want %d", m.watermark(), now-10*s)
	}
}

// TestOverflowConservesRecords runs streams with few series slots and many keys: whatever goes to the
// overflow series, the records of every window, summed over its series, must all come out, and the
// regular series must never exceed max_series. The wall clock keeps up with the records, so that
// series are released only at a Collect and the series that fire at one Collect were held at once.
func TestOverflowConservesRecords(t *testing.T) {
	s := time.Second
	configs := []modelConfig{
		{name: "overflow-tumbling", size: 10 * s, lateness: 5 * s, ooo: s, idle: 15 * s, skew: 30 * s, keys: 12,
			seeds: 20, ops: 40, maxSeries: 2, clockKeepsUp: true, aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "overflow-sliding", size: 4 * s, slide: s, lateness: 3 * s, skew: 30 * s, keys: 10,
			seeds: 20, ops: 30, maxSeries: 3, clockKeepsUp: true, aggs: []Aggregation{{Histogram: true}}},
	}
	for _, c := range configs {
		for _, staged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/staged=%v", c.name, staged), func(t *testing.T) {
				t.Parallel()
				failures := 0
				for seed := range uint64(seedsFor(&c)) {
					sc := genScenario(&c, seed)
					if msg := runOverflowScenario(sc, staged); msg != "" {
						failures++
						if failures <= 3 {
							t.Errorf("%s seed %d: %s\nstream:\n%s", c.name, seed, msg, describeScenario(sc))
						}
					}
				}
			})
		}
	}
}

// applyRecords puts recs into b, one at a time (addOne) or, when staged, with stage and one Apply, and
// returns the engine's verdict for each.
func applyRecords(b *Batch, recs []refRec, staged bool) []Verdict {
	out := make([]Verdict, len(recs))
	for j, r := range recs {
		if staged {
			out[j] = b.stage(r.agg, []byte(r.key), r.t, r.v, int32(j))
		} else {
			out[j] = addOne(b, r.agg, []byte(r.key), r.t, r.v)
		}
	}
	if staged {
		b.Apply(func(tag int32, vd Verdict, _ int64) { out[tag] = vd })
	}
	return out
}

func runOverflowScenario(sc *scenario, staged bool) string {
	c := sc.cfg
	tf := timeFmt{sc.base}
	e, clk := newModelEngine(c, sc.base)
	m := newRefModel(c)
	type aggWin struct {
		agg   int
		start int64
	}
	got := map[aggWin]uint64{}
	check := func(fs []firingRec, when string) string {
		regular := make([]map[string]bool, len(c.aggs))
		for i := range regular {
			regular[i] = map[string]bool{}
		}
		for i := range fs {
			f := &fs[i]
			got[aggWin{f.Agg, f.Start}] += f.Count
			if f.Overflow && f.Key != "" {
				return fmt.Sprintf("%s: overflow firing with key %q", when, f.Key)
			}
			if !f.Overflow {
				regular[f.Agg][f.Key] = true
			}
		}
		for a, keys := range regular {
			if len(keys) > c.maxSeries {
				return fmt.Sprintf("%s: %d regular series of agg%d fired at one Collect, max_series is %d", when, len(keys), a, c.maxSeries)
			}
		}
		st := e.Stats()
		for a, n := range st.ActiveSeries {
			if n < 0 || n > int64(c.maxSeries) {
				return fmt.Sprintf("%s: Stats().ActiveSeries[%d] = %d, max_series %d", when, a, n, c.maxSeries)
			}
		}
		return ""
	}
	for i, op := range sc.ops {
		clk.Set(time.Unix(0, op.batchNow))
		b := e.Begin(op.batchNow)
		mb := m.begin(op.batchNow)
		got := applyRecords(b, op.recs, staged)
		for j, r := range op.recs {
			if g, w := got[j], mb.add(r.agg, r.key, r.t, r.v); g != w {
				return fmt.Sprintf("op %d record %d (agg%d %q t=%s): verdict %v, want %v", i, j, r.agg, r.key, tf.t(r.t), g, w)
			}
		}
		b.End()
		mb.end()
		m.collect(op.collectNow)
		clk.Set(time.Unix(0, op.collectNow))
		if msg := check(collectFiringsOf(e, op.collectNow, false), fmt.Sprintf("op %d", i)); msg != "" {
			return msg
		}
		if g, w := e.Watermark(), m.watermark(); g != w {
			return fmt.Sprintf("op %d: Watermark() = %s, want %s", i, tf.t(g), tf.t(w))
		}
	}
	if msg := check(fireAllFirings(e), "FireAll"); msg != "" {
		return msg
	}
	want := map[aggWin]uint64{}
	for id, n := range m.added {
		want[aggWin{id.agg, id.start}] += n
	}
	var bad []string
	for k, n := range want {
		if got[k] != n {
			bad = append(bad, fmt.Sprintf("agg%d window %s: firings carried %d records, %d were added", k.agg, tf.window(k.start, k.start+int64(c.size)), got[k], n))
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			bad = append(bad, fmt.Sprintf("agg%d window %s: firings carried %d records, none was added", k.agg, tf.window(k.start, k.start+int64(c.size)), n))
		}
	}
	st := e.Stats()
	for a := range c.aggs {
		if st.ActiveSeries[a] != 0 || st.OverflowActive[a] {
			bad = append(bad, fmt.Sprintf("after FireAll agg%d: ActiveSeries %d, OverflowActive %v", a, st.ActiveSeries[a], st.OverflowActive[a]))
		}
	}
	sort.Strings(bad)
	return strings.Join(bad, "\n")
}

// TestConcurrentIngestConservesRecords ingests from several goroutines while another collects (and
// snapshots); in a tumbling configuration every aggregated record is in exactly one window, so the
// counts of all firings of a window must add up to the records aggregated into it.
func TestConcurrentIngestConservesRecords(t *testing.T) {
	s := int64(time.Second)
	clk := clock.NewFake(time.Unix(0, realNow))
	cfg := Config{Size: 10 * time.Second, AllowedLateness: 20 * time.Second, MaxOutOfOrderness: 2 * time.Second,
		IdleTimeout: 3 * time.Second, MaxFutureSkew: 10 * time.Second, shards: 4, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: 1000, Quantiles: fullQuantiles, Histogram: true}, {MaxSeries: 3}}}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const workers, batches = 4, 400
	type aggWin struct {
		agg   int
		start int64
	}
	tallies := make([]map[aggWin]uint64, workers)
	verdicts := make([][numVerdicts]uint64, workers)
	var wg sync.WaitGroup
	var done atomic.Bool
	var collects atomic.Int64
	for w := range workers {
		tallies[w] = map[aggWin]uint64{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			// at least `batches` batches, and on until the collector has run 150 times
			for i := 0; i < batches || (collects.Load() < 150 && i < 20*batches); i++ {
				now := clk.Now()
				b := e.Begin(now)
				staged := w%2 == 1 // odd workers stage their batches and apply them at once
				var recs []refRec
				var got []Verdict
				for range 1 + rng.IntN(20) {
					t := now - randIn(rng, -12*s, 40*s)
					if rng.IntN(50) == 0 {
						t = 0
					}
					r := refRec{agg: rng.IntN(2), key: "k" + strconv.Itoa(rng.IntN(8)), t: t, v: genValue(rng, nil, 5)}
					recs = append(recs, r)
					if !staged {
						got = append(got, addOne(b, r.agg, []byte(r.key), r.t, r.v))
						if rng.IntN(8) == 0 {
							runtime.Gosched() // let a Collect run in the middle of the batch
						}
					}
				}
				if staged {
					got = applyRecords(b, recs, true)
				}
				for j, v := range got {
					if v >= numVerdicts {
						panic(fmt.Sprintf("verdict %d", v))
					}
					verdicts[w][v]++
					if r := recs[j]; v.Aggregated() {
						tallies[w][aggWin{r.agg, r.t - mod(r.t, 10*s)}]++
					}
				}
				b.End()
			}
		}()
	}
	got := map[aggWin]uint64{}
	firsts := map[windowID]int{}
	var problems []string
	collect := func(r *Result) {
		got[aggWin{r.Agg, r.Start}] += r.Count
		if r.End-r.Start != 10*s || mod(r.Start, 10*s) != 0 || r.Count == 0 {
			problems = append(problems, fmt.Sprintf("odd firing %+v", *r))
		}
		if !r.late {
			if firsts[windowID{r.Agg, r.Overflow, r.Key, r.Start}]++; firsts[windowID{r.Agg, r.Overflow, r.Key, r.Start}] > 1 {
				problems = append(problems, fmt.Sprintf("second first firing of window %+v", *r))
			}
		}
	}
	collectorDone := make(chan struct{})
	go func() {
		defer close(collectorDone)
		rng := rand.New(rand.NewPCG(99, 7))
		lastW := int64(math.MinInt64)
		for i := 0; !done.Load(); i++ {
			now := clk.Advance(time.Duration(randIn(rng, 0, 400) * int64(time.Millisecond)))
			if rng.IntN(25) == 0 {
				now = clk.Advance(5 * time.Second) // let the idle rule act
			}
			e.Collect(now, collect)
			collects.Add(1)
			if i%20 == 0 {
				_ = e.Snapshot(nil)
				_ = e.Stats()
			}
			if w := e.Watermark(); w < lastW {
				problems = append(problems, fmt.Sprintf("watermark went back from %d to %d", lastW, w))
			} else {
				lastW = w
			}
			runtime.Gosched()
		}
	}()
	wg.Wait()
	done.Store(true)
	<-collectorDone
	e.Collect(clk.Now(), collect)
	e.FireAll(collect)
	for _, p := range problems[:min(len(problems), 10)] {
		t.Error(p)
	}
	want := map[aggWin]uint64{}
	var wantVerdicts [numVerdicts]uint64
	var aggregated, carried uint64
	for w := range workers {
		for k, n := range tallies[w] {
			want[k] += n
			aggregated += n
		}
		for v, n := range verdicts[w] {
			wantVerdicts[v] += n
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("agg%d window starting %d: firings carried %d records, %d were aggregated", k.agg, k.start, got[k], n)
		}
	}
	for k, n := range got {
		carried += n
		if want[k] == 0 {
			t.Errorf("agg%d window starting %d: firings carried %d records, none was aggregated", k.agg, k.start, n)
		}
	}
	if carried != aggregated {
		t.Errorf("firings carried %d records in all, %d were aggregated", carried, aggregated)
	}
	st := e.Stats()
	if st.verdicts != wantVerdicts {
		t.Errorf("Stats().verdicts = %v, the Adds returned %v", st.verdicts, wantVerdicts)
	}
	for a, n := range st.ActiveSeries {
		if n != 0 || st.OverflowActive[a] {
			t.Errorf("after FireAll agg%d: ActiveSeries %d OverflowActive %v", a, n, st.OverflowActive[a])
		}
	}
	t.Logf("%d records aggregated, verdicts %v, %d Collects", aggregated, wantVerdicts, collects.Load())
}

// TestSnapshotRestoreMidStream snapshots and restores the engine at random points of random streams
// (between End and Collect, and after Collect, sometimes after some downtime) and requires every
// verdict, watermark and firing to be the model's, whose restore is a restart (the idle rule and every
// restored source count from the restore's wall time), and to be bit for bit those of an uninterrupted
// engine for as long as the restarts have not changed W.
func TestSnapshotRestoreMidStream(t *testing.T) {
	for _, c := range modelConfigs() {
		c.seeds = max(c.seeds/8, 3)
		if c.name == "sliding60s/1s" {
			c.seeds = 2
		}
		c.snapBeforeCollectRate, c.snapAfterCollectRate = 0.08, 0.08
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			runSeeds(t, &c, runOptions{snapshots: true})
		})
	}
}

// TestSnapshotHalfwayEqualsUninterrupted is the plain round trip: half a stream, Snapshot, Restore into
// a fresh engine with a fresh clock at the same time, the other half; all firings must equal those of an
// engine that ran the whole stream (unless the restart, from which the idle rule counts afresh, changed
// W: then those of the model).
func TestSnapshotHalfwayEqualsUninterrupted(t *testing.T) {
	for _, c := range modelConfigs()[:5] {
		for seed := range uint64(4) {
			sc := genScenario(&c, 1000+seed)
			half := len(sc.ops) / 2
			sc.ops[half].snapAfterCollect = true
			if f := runScenario(sc, runOptions{snapshots: true}); f != nil {
				t.Errorf("%s seed %d: %s\nstream:\n%s", c.name, 1000+seed, f, describeScenario(sc))
			}
		}
	}
}

// TestRestoreRejectsDamagedSnapshots feeds Restore every truncation of a real snapshot, garbage and a
// snapshot of another configuration; each must fail, and the engine must then work as a fresh one.
func TestRestoreRejectsDamagedSnapshots(t *testing.T) {
	cs := modelConfigs()
	c := &cs[1] // two aggregations, one with quantiles and a histogram
	sc := genScenario(c, 5)
	e, _ := newModelEngine(c, sc.base)
	half := len(sc.ops) / 2
	for i, op := range sc.ops[:half] {
		b := e.Begin(op.batchNow)
		for _, r := range op.recs {
			addOne(b, r.agg, []byte(r.key), r.t, r.v)
		}
		b.End()
		if i < half-1 { // leave the last batch's firings pending, so that the snapshot carries results
			e.Collect(op.collectNow, func(*Result) {})
		}
	}
	snap := e.Snapshot(nil)
	if len(snap) < 100 {
		t.Fatalf("snapshot of %d bytes: the stream left too little state", len(snap))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var damaged [][]byte
	for n := range len(snap) {
		if n < 300 || rng.IntN(max(len(snap)/300, 1)) == 0 {
			damaged = append(damaged, snap[:n])
		}
	}
	damaged = append(damaged, nil, []byte("WAGS"), []byte("XXXX\x01"), append(slices.Clone(snap), 0))
	for range 50 {
		g := make([]byte, rng.IntN(200))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		damaged = append(damaged, g, append([]byte("WAGS\x01"), g...))
	}
	for i, d := range damaged {
		fresh, _ := newModelEngine(c, sc.base)
		if err := fresh.Restore(d); err == nil {
			t.Fatalf("damaged snapshot %d (%d of %d bytes) restored without error", i, len(d), len(snap))
		}
	}
	// another configuration
	other := *c
	other.lateness++
	oe, _ := newModelEngine(&other, sc.base)
	if err := oe.Restore(snap); err == nil {
		t.Fatal("a snapshot restored into an engine with another allowed lateness")
	}
	other = *c
	other.aggs = []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {Histogram: true}}
	oe, _ = newModelEngine(&other, sc.base)
	if err := oe.Restore(snap); err == nil {
		t.Fatal("a snapshot restored into an engine with other aggregations")
	}
	// byte flips must not panic; Restore may or may not notice them
	for range 300 {
		d := slices.Clone(snap)
		d[rng.IntN(len(d))] ^= byte(1 + rng.IntN(255))
		fresh, _ := newModelEngine(c, sc.base)
		if fresh.Restore(d) == nil {
			fresh.Collect(sc.base, func(*Result) {})
			fresh.FireAll(func(*Result) {})
		}
	}
	// after a failed Restore, the engine works as a fresh one: the whole stream matches the model
	fresh, _ := newModelEngine(c, sc.base)
	if err := fresh.Restore(snap[:len(snap)/2]); err == nil {
		t.Fatal("half a snapshot restored")
	}
	if f := runScenarioOn(fresh, sc); f != nil {
		t.Errorf("after a failed Restore: %s", f)
	}
}

// runScenarioOn runs sc on a given engine and checks verdicts, watermarks and per-window totals against
// the model (not the firings' detail, which TestEngineMatchesReferenceModel covers).
func runScenarioOn(e *Engine, sc *scenario) *runFailure {
	m := newRefModel(sc.cfg)
	tf := timeFmt{sc.base}
	totals := map[refWinID]uint64{}
	add := func(fs []firingRec) {
		for _, f := range fs {
			totals[refWinID{f.Agg, f.Key, f.Start}] += f.Count
		}
	}
	for i, op := range sc.ops {
		b := e.Begin(op.batchNow)
		mb := m.begin(op.batchNow)
		for j, r := range op.recs {
			if g, w := addOne(b, r.agg, []byte(r.key), r.t, r.v), mb.add(r.agg, r.key, r.t, r.v); g != w {
				return &runFailure{op: i, lines: []string{fmt.Sprintf("record %d: verdict %v, want %v", j, g, w)}}
			}
		}
		b.End()
		mb.end()
		add(collectFirings(e, op.collectNow))
		m.collect(op.collectNow)
		if g, w := e.Watermark(), m.watermark(); g != w {
			return &runFailure{op: i, lines: []string{fmt.Sprintf("Watermark() = %s, want %s", tf.t(g), tf.t(w))}}
		}
	}
	add(fireAllFirings(e))
	m.fireAll()
	for id, n := range m.added {
		if totals[id] != n {
			return &runFailure{op: len(sc.ops), final: true, lines: []string{fmt.Sprintf("window %+v: firings carried %d, %d added", id, totals[id], n)}}
		}
	}
	return nil
}

// TestBatchJudgedAgainstBeginWatermarkAcrossCollect: the contract judges every record of a batch against
// the W that held at its Begin. Collect may run between a batch's Begin and its Adds (ingest and Collect
// are concurrent), and may move W there (idle rule, or batches that ended meanwhile). The records added
// after it must still be judged against the Begin watermark.
func TestBatchJudgedAgainstBeginWatermarkAcrossCollect(t *testing.T) {
	// The contract as documented: a batch is judged against the watermark at its Begin, or a later one
	// when the watermark moved meanwhile (a Collect's idle rule, or another batch's records brought
	// the shards forward). Windows discarded in between are not resurrected.
	s := int64(time.Second)
	clk := clock.NewFake(time.Unix(0, realNow))
	e, err := New(Config{Size: 10 * time.Second, IdleTimeout: 5 * time.Second, MaxFutureSkew: time.Minute,
		Aggregations: []Aggregation{{MaxSeries: 10}}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	base := realNow - mod(realNow, 10*s) // a window start
	now := clk.Now()
	b := e.Begin(now)
	addOne(b, 0, []byte("a"), base+5*s, 1)
	b.End() // W = base+5s
	e.Collect(now, func(*Result) {})

	b = e.Begin(now)                      // begins at W = base+5s
	e.Collect(now+20*s, func(*Result) {}) // idle: W = base+25s; [base, base+10s) fires and is discarded
	got := []Verdict{
		addOne(b, 0, []byte("a"), base+7*s, 1),  // [base, base+10s) is gone: Expired
		addOne(b, 0, []byte("b"), base+27*s, 1), // [base+20s, base+30s): OnTime
	}
	b.End()
	if got[0] != Expired || got[1] != OnTime {
		t.Errorf("verdicts %v, want [expired on_time]: judged against the newer watermark; Watermark() now %s",
			got, timeFmt{base}.t(e.Watermark()))
	}
}

// TestStagedEqualsOneAtATimeWhenCollectedEveryBatch drives two engines with the same hash seed through the
// same overflow-heavy streams, one adding a record at a time, one staging each batch and applying it, and
// collecting after every batch: verdicts and firings (which series hold the max_series slots
// included) must be identical. Without a Collect per batch, or with W moving with the wall clock
// between a Collect and the next batch, they may differ in which new series get slots that expired
// series freed (see Batch): the wall clock keeps up with the records.
func TestStagedEqualsOneAtATimeWhenCollectedEveryBatch(t *testing.T) {
	s := time.Second
	configs := []modelConfig{
		{name: "tumbling", size: 10 * s, lateness: 5 * s, ooo: s, idle: 15 * s, skew: 30 * s, keys: 12, shards: 4,
			seeds: 40, ops: 40, maxSeries: 3, clockKeepsUp: true, aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "sliding", size: 4 * s, slide: s, lateness: 3 * s, skew: 30 * s, keys: 10, shards: 4,
			seeds: 40, ops: 30, maxSeries: 2, clockKeepsUp: true, aggs: []Aggregation{{Histogram: true}}},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(seedsFor(&c)) {
				sc := genScenario(&c, seed)
				ea, clkA := newModelEngine(&c, sc.base)
				eb, clkB := newModelEngine(&c, sc.base)
				eb.seed = ea.seed
				for i, op := range sc.ops {
					clkA.Set(time.Unix(0, op.batchNow))
					clkB.Set(time.Unix(0, op.batchNow))
					ba, bb := ea.Begin(op.batchNow), eb.Begin(op.batchNow)
					va, vb := applyRecords(ba, op.recs, false), applyRecords(bb, op.recs, true)
					ba.End()
					bb.End()
					if !slices.Equal(va, vb) {
						t.Fatalf("seed %d op %d: verdicts one at a time %v, staged %v", seed, i, va, vb)
					}
					fa, fb := collectFirings(ea, op.collectNow), collectFirings(eb, op.collectNow)
					if !reflect.DeepEqual(fa, fb) {
						t.Fatalf("seed %d op %d: firings differ\nAdd:    %+v\nstaged: %+v", seed, i, fa, fb)
					}
				}
			}
		})
	}
}

// TestFullPendingValuesOfAPaneInTheSlidingSketch holds the engine to the model on a stream that the
// random scenarios reach rarely: a series' head gathers pendingValues values, and inserts them, while
// its pane is in the range of the series' sliding-window sketch (a window holding the pane has fired,
// and with no allowed lateness the pane's records are still on time for the windows after it).
func TestFullPendingValuesOfAPaneInTheSlidingSketch(t *testing.T) {
	s := int64(time.Second)
	c := &modelConfig{name: "sliding4s/1s-full-pending", size: 4 * time.Second, slide: time.Second,
		skew: time.Minute, aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}}
	base := realNow
	p := base + 10*s // the pane the records go to
	rng := rand.New(rand.NewPCG(3, 5))
	inPane := func(n int) []refRec {
		var recs []refRec
		for i := range n {
			for agg := range 2 {
				recs = append(recs, refRec{agg: agg, key: "k", t: p + int64(i)*s/int64(n), v: math.Exp(3 + rng.NormFloat64())})
			}
		}
		return recs
	}
	sc := &scenario{cfg: c, seed: 0, base: base, ops: []scenOp{
		// Records in the two panes before p as well, so that the fired window merges several panes
		// and the series keeps a sliding-window sketch.
		{batchNow: base + 12*s, collectNow: base + 12*s, recs: append([]refRec{
			{agg: 0, key: "k", t: p - 2*s, v: 3}, {agg: 0, key: "k", t: p - s, v: 4}, {agg: 1, key: "k", t: p - s, v: 5},
		}, inPane(3*pendingValues+5)...)},
		// W passes p+1s: the window [p-3s, p+1s) fires, and the sliding sketch holds it.
		{batchNow: base + 12*s, collectNow: base + 12*s, recs: []refRec{{agg: 0, key: "k", t: p + 1500*time.Millisecond.Nanoseconds(), v: 1}}},
		// On time for the windows ending at p+2s, p+3s and p+4s: into the pane, and into the sketch.
		{batchNow: base + 12*s, collectNow: base + 12*s, recs: inPane(3*pendingValues + 7)},
		{batchNow: base + 30*s, collectNow: base + 30*s, recs: []refRec{{agg: 0, key: "k", t: base + 29*s, v: 2}}},
	}}
	for _, opt := range []runOptions{{}, {staged: true}} {
		if f := runScenario(sc, opt); f != nil {
			reportFailure(t, sc, opt, f)
		}
	}
}
