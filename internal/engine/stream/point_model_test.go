package stream

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
	"github.com/windowaggregator/windowaggregator/internal/engine/exemplar"
)

// The points of the additive outputs, checked on the model scenarios against what the contract says
// of each record, worked out from the reference model's verdicts and watermark alone:
//   - a record whose slide ends after the W it was judged by is in the point at the end of its slide;
//   - any other (a late one with late records folded, or one on time for a window still to fire) is
//     in the point at the first window end after that W; no point of a series has the timestamp of
//     another;
//   - delta points cover one slide each; cumulative points carry the running totals from a start
//     that stays the same while the series lives, at every window end until series_expiration has
//     passed since its newest data; the start is that of the first window holding a record of the
//     life's first point, however the record came (on time, late and folded, or folded after its
//     panes were gone);
//   - records weigh from 1 to about a million (genWeight): a record of weight w counts as w records
//     of its value in the counts, sums and buckets;
//   - with late firings that revise, every accepted record is in exactly one point;
//   - the first aggregation keeps pointExemplars exemplars: those of a point are records of that
//     point (cumulative: of those added since the previous point), as many as it has values up to
//     the limit, the greatest among them; a window's max exemplar is a record of the window with its
//     max; the other aggregations have none;
//   - all of it across a snapshot and restore every few batches, with results pending or not.

// pointBounds are the explicit buckets of the first aggregation of every point scenario, and
// pointExemplars its exemplars.
var pointBounds = []float64{-1000, 0, 1, 10, 1000, 1e6}

const pointExemplars = 3

// spanOf is the span ids of the n-th record of a scenario (n > 0), and recordOfSpan the reverse.
func spanOf(n uint64) (trace [16]byte, span [8]byte) {
	for i := range 8 {
		trace[i], span[i] = byte(n>>(8*i)), byte(n>>(8*i))
	}
	trace[15] = 0xee
	return trace, span
}

func recordOfSpan(trace [16]byte) uint64 {
	var n uint64
	for i := range 8 {
		n |= uint64(trace[i]) << (8 * i)
	}
	return n
}

type pointMode struct {
	name             string
	cumulative, fold bool
}

var pointModes = []pointMode{{"delta-revise", false, false}, {"delta-fold", false, true}, {"cumulative", true, true}}

// pointContent is what one point of a series should hold.
type pointContent struct {
	count, valueCount uint64
	sum, sumAbs       float64
	min, max          float64 // of the values, with valueCount > 0; -Inf and +Inf: unknown (see Distribution)
	buckets           []uint64
	recs              []uint64 // the records with a value and a span, by number (see spanOf)
	firstT            int64    // the earliest event time of its records, when count > 0
}

// add counts record r, record number rec (0: no span), at its weight.
func (c *pointContent) add(r *refRec, rec uint64) {
	if c.count == 0 || r.t < c.firstT {
		c.firstT = r.t
	}
	c.count += r.weight()
	vals := r.values()
	if len(vals) == 0 {
		return
	}
	if rec != 0 {
		c.recs = append(c.recs, rec)
	}
	lo, hi := vals[0].v, vals[0].v
	for _, x := range vals {
		c.sum += float64(x.n) * x.v
		c.sumAbs += float64(x.n) * math.Abs(x.v)
		if c.buckets == nil {
			c.buckets = make([]uint64, len(pointBounds)+1)
		}
		i := 0
		for i < len(pointBounds) && x.v > pointBounds[i] {
			i++
		}
		c.buckets[i] += x.n
		lo, hi = min(lo, x.v), max(hi, x.v)
	}
	if r.noMinMax {
		lo, hi = math.Inf(-1), math.Inf(1)
	}
	c.addMinMax(lo, hi)
	c.valueCount += uint64(len(vals))
	if r.dist == nil {
		c.valueCount += r.weight() - 1
	}
}

// addMinMax takes the least and greatest of values added to the point.
func (c *pointContent) addMinMax(lo, hi float64) {
	if c.valueCount == 0 || lo < c.min {
		c.min = lo
	}
	if c.valueCount == 0 || hi > c.max {
		c.max = hi
	}
}

type seriesID struct {
	agg int
	key string
}

type gotPoint struct {
	end, start        int64
	count, valueCount uint64
	sum, min, max     float64
	buckets           []uint64
	histCount         uint64
	hasHist           bool
	late, atFireAll   bool
	exemplars         []exemplar.Exemplar
}

func TestPointsFollowTheContract(t *testing.T) {
	for _, c := range modelConfigs() {
		if c.perSource {
			continue
		}
		c.aggs = slices.Clone(c.aggs)
		c.aggs[0].Bounds = pointBounds
		c.aggs[0].Exemplars = pointExemplars
		c.weights = true
		for _, mode := range pointModes {
			t.Run(c.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				for seed := range max(c.seeds/4, 4) {
					sc := genScenario(&c, uint64(seed)+3000)
					if problems := runPointScenario(sc, mode); len(problems) > 0 {
						if len(problems) > 12 {
							problems = append(problems[:12], fmt.Sprintf("... %d more", len(problems)-12))
						}
						t.Fatalf("seed %d:\n%s", seed+3000, joinLines(problems))
					}
				}
			})
		}
	}
}

func joinLines(ls []string) string {
	out := ""
	for _, l := range ls {
		out += "  " + l + "\n"
	}
	return out
}

func runPointScenario(sc *scenario, mode pointMode) []string {
	c := sc.cfg
	slide, size, lateness := int64(c.slideOrSize()), int64(c.size), int64(c.lateness)
	off := mod(int64(c.offset), slide) // windows start at off + k × slide
	// paneStart is the start of the slide holding t.
	paneStart := func(t int64) int64 { return t - mod(t-off, slide) }
	expiration := 2*size + lateness
	clk := clock.NewFake(time.Unix(0, sc.base))
	cfg := c.engineConfig(clk)
	cfg.Cumulative, cfg.FoldLate, cfg.SeriesExpiration = mode.cumulative, mode.fold, time.Duration(expiration)
	e, err := New(cfg)
	if err != nil {
		return []string{err.Error()}
	}
	m := newRefModel(c)
	m.quiet = true
	tf := timeFmt{sc.base}
	slideEnd := func(t int64) int64 { return paneStart(t) + slide }

	want := map[seriesID]map[int64]*pointContent{} // by series and point timestamp
	dataEnd := map[seriesID]map[int64]int64{}      // by series and point timestamp: the greatest slide end of its records
	accepted := map[seriesID]uint64{}
	var recs []refRec                   // by number - 1
	var spanned uint64                  // the number of the record being staged; 0: it has no span
	unspanned := map[seriesID][]int64{} // the times of the records with a value and no span
	var problems []string
	bad := func(id seriesID, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("agg%d %q: ", id.agg, id.key)+fmt.Sprintf(format, args...))
	}
	expect := func(id seriesID, end, dend int64, r *refRec) {
		if want[id] == nil {
			want[id], dataEnd[id] = map[int64]*pointContent{}, map[int64]int64{}
		}
		if want[id][end] == nil {
			want[id][end] = &pointContent{}
		}
		want[id][end].add(r, spanned)
		dataEnd[id][end] = max(dataEnd[id][end], dend)
		accepted[id] += r.weight()
	}
	got := map[seriesID][]gotPoint{}
	atFireAll := false
	collect := func(r *Result) {
		if !r.HasPoint || r.Overflow {
			return
		}
		p := gotPoint{end: r.End, start: r.Point.Start, count: r.Point.Count, valueCount: r.Point.ValueCount,
			sum: r.Point.Sum, min: r.Point.Min, max: r.Point.Max, buckets: slices.Clone(r.Point.BucketCounts), late: r.HasWindow && r.late, atFireAll: atFireAll}
		if r.Point.Hist != nil {
			p.hasHist, p.histCount = true, r.Point.Hist.Count()
		}
		id := seriesID{r.Agg, r.Key}
		p.exemplars = slices.Clone(r.Point.Exemplars)
		got[id] = append(got[id], p)
	}
	checkMaxExemplar := func(r *Result) {
		id := seriesID{r.Agg, r.Key}
		if r.Overflow || !r.HasWindow {
			return
		}
		if c.aggs[r.Agg].Exemplars == 0 || r.WindowValueCount == 0 {
			if r.HasMaxExemplar {
				bad(id, "window [%s, %s) has a max exemplar, without exemplars or values", tf.t(r.Start), tf.t(r.End))
			}
			return
		}
		// A window with a record without a span may have its max there, or all its values there.
		mixed := slices.ContainsFunc(unspanned[id], func(t int64) bool { return t >= r.Start && t < r.End })
		if mixed && !r.HasMaxExemplar {
			return
		}
		n := recordOfSpan(r.MaxExemplar.TraceID)
		if !r.HasMaxExemplar || n == 0 || n > uint64(len(recs)) {
			bad(id, "window [%s, %s): max exemplar %v is no record", tf.t(r.Start), tf.t(r.End), r.MaxExemplar)
			return
		}
		rec := recs[n-1]
		if rec.agg != r.Agg || rec.key != r.Key || rec.t < r.Start || rec.t >= r.End || rec.v > r.Max || (!mixed && rec.v != r.Max) ||
			r.MaxExemplar.Value != rec.v || r.MaxExemplar.Time != rec.t {
			bad(id, "window [%s, %s) with max %g: max exemplar %+v is of record %+v", tf.t(r.Start), tf.t(r.End), r.Max, r.MaxExemplar, rec)
		}
	}
	onResult := func(r *Result) {
		checkMaxExemplar(r)
		collect(r)
	}
	for i, op := range sc.ops {
		clk.Set(time.Unix(0, op.batchNow))
		b := e.Begin(op.batchNow)
		mb := m.begin(op.batchNow)
		wb := mb.watermarkOrInf()
		for j, r := range op.recs {
			vd := mb.addRec(r)
			recs = append(recs, r)
			spanned = uint64(len(recs))
			if spanned%5 == 0 || r.dist != nil {
				spanned = 0 // a record without a span (a distribution never has one): counted, no exemplar
				if len(r.values()) > 0 {
					unspanned[seriesID{r.agg, r.key}] = append(unspanned[seriesID{r.agg, r.key}], r.t)
				}
			}
			if r.dist != nil {
				if b.Check(r.t) == OnTime {
					b.StageDistribution(&Record{Agg: r.agg, Key: []byte(r.key), Time: r.t, Tag: int32(j)}, distOf(&c.aggs[r.agg], &r))
				}
			} else if b.Check(r.t) == OnTime {
				rec := Record{Agg: r.agg, Key: []byte(r.key), Time: r.t, Value: r.v, Tag: int32(j), Weight: r.w}
				if spanned != 0 {
					rec.TraceID, rec.SpanID = spanOf(spanned)
				}
				b.StageChecked(&rec)
			}
			id := seriesID{r.agg, r.key}
			se := slideEnd(r.t)
			next := paneStart(wb) + slide // the first window end after W
			switch {
			case vd != OnTime && vd != LateUpdate:
			case se > wb:
				expect(id, se, se, &r) // its own slide's point is still to come
			case vd == LateUpdate && !mode.fold && se+lateness > wb:
				expect(id, se, se, &r) // a late firing of its own slide
			default:
				expect(id, next, se, &r)
			}
		}
		b.Apply(func(int32, Verdict, int64) {})
		b.End()
		mb.end()
		clk.Set(time.Unix(0, op.collectNow))
		// restart snapshots the engine into a fresh one, and the model likewise.
		restart := func() error {
			fresh, err := New(cfg)
			if err == nil {
				err = fresh.Restore(e.Snapshot(nil))
			}
			if err != nil {
				return err
			}
			e = fresh
			m.snapshot(op.collectNow)
			m.restore(op.collectNow)
			return nil
		}
		if i%5 == 2 { // a restart with results not collected yet: they travel in the snapshot
			if err := restart(); err != nil {
				return []string{fmt.Sprintf("snapshot before the collect of op %d: %v", i, err)}
			}
		}
		m.collect(op.collectNow)
		e.Collect(op.collectNow, onResult)
		if i%5 == 4 { // a restart with storage: the series' totals, folded records and starts carry over
			if err := restart(); err != nil {
				return []string{fmt.Sprintf("snapshot after op %d: %v", i, err)}
			}
		}
	}
	lastEnd := paneStart(e.Watermark()) // the last window end before FireAll
	atFireAll = true
	e.FireAll(onResult)

	ids := make([]seriesID, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	for id := range got {
		if accepted[id] == 0 {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		a := c.aggs[id.agg]
		ps := got[id]
		// What every point must be, whatever the mode.
		for _, p := range ps {
			if (a.Bounds != nil) != (p.buckets != nil) {
				bad(id, "point at %s: bucket counts %v, want them with explicit bounds only", tf.t(p.end), p.buckets)
			}
			var nb uint64
			for _, n := range p.buckets {
				nb += n
			}
			if p.buckets != nil && nb != p.valueCount {
				bad(id, "point at %s: bucket counts %v add up to %d, its values are %d", tf.t(p.end), p.buckets, nb, p.valueCount)
			}
			if a.Histogram != p.hasHist || (p.hasHist && p.histCount != p.valueCount) {
				bad(id, "point at %s: sketch %v with %d values, point has %d", tf.t(p.end), p.hasHist, p.histCount, p.valueCount)
			}
		}
		checkPointExemplars(id, ps, want[id], a.Exemplars, recs, !mode.fold, bad, tf)
		if !mode.fold {
			var n uint64
			for _, p := range ps {
				n += p.count
			}
			if n != accepted[id] {
				bad(id, "points carry %d records, %d were accepted", n, accepted[id])
			}
			continue
		}
		for i := 1; i < len(ps); i++ {
			if ps[i].end <= ps[i-1].end {
				bad(id, "point at %s after one at %s: timestamps must strictly increase", tf.t(ps[i].end), tf.t(ps[i-1].end))
			}
		}
		byEnd := map[int64]int{}
		for i, p := range ps {
			byEnd[p.end] = i
		}
		for end, w := range want[id] {
			if _, ok := byEnd[end]; !ok {
				bad(id, "no point at %s, which should carry %d records", tf.t(end), w.count)
			}
		}
		if !mode.cumulative {
			for _, p := range ps {
				w := want[id][p.end]
				if w == nil {
					w = &pointContent{}
				}
				if p.start != p.end-slide {
					bad(id, "delta point [%s, %s): not one slide", tf.t(p.start), tf.t(p.end))
				}
				checkContent(id, p, w, bad, tf)
			}
			continue
		}
		// Cumulative: a life is a run of points with one start, at consecutive window ends while the
		// series lives; a new one begins only once the last has expired. FireAll adds the windows
		// still open without filling the ends between them.
		var run pointContent
		lastData := minTime
		for i, p := range ps {
			if i > 0 {
				prev := ps[i-1]
				newLife, gap := p.start != prev.start, p.end != prev.end+slide
				if (newLife || gap) && !p.atFireAll && prev.end+slide < lastData+expiration {
					bad(id, "after the point at %s the next is at %s with start %s, though its newest data ended at %s",
						tf.t(prev.end), tf.t(p.end), tf.t(p.start), tf.t(lastData))
				}
				if newLife {
					run = pointContent{} // the totals start again
				}
			}
			if w := want[id][p.end]; (i == 0 || p.start != ps[i-1].start) && w != nil {
				// A life's first point: its start is that of the first window of its earliest record.
				if first := paneStart(w.firstT) + slide - size; p.start != first {
					bad(id, "the first cumulative point of a life, at %s, starts at %s; its earliest record, at %s, is first in the window starting at %s",
						tf.t(p.end), tf.t(p.start), tf.t(w.firstT), tf.t(first))
				}
			}
			if w := want[id][p.end]; w != nil {
				if w.valueCount > 0 {
					run.addMinMax(w.min, w.max)
				}
				run.count += w.count
				run.valueCount += w.valueCount
				run.sum += w.sum
				run.sumAbs += w.sumAbs
				if w.buckets != nil {
					if run.buckets == nil {
						run.buckets = make([]uint64, len(pointBounds)+1)
					}
					addCounts(run.buckets, w.buckets)
				}
				lastData = max(lastData, dataEnd[id][p.end])
			}
			if mod(p.start-off, slide) != 0 || p.start > p.end-size {
				bad(id, "cumulative point at %s starts at %s", tf.t(p.end), tf.t(p.start))
			}
			checkContent(id, p, &run, bad, tf)
		}
		if n := len(ps); n > 0 && !ps[n-1].atFireAll && ps[n-1].end+slide < min(lastData+expiration, lastEnd+slide) {
			bad(id, "last point at %s, though the series lives until %s and windows ended until %s",
				tf.t(ps[n-1].end), tf.t(lastData+expiration), tf.t(lastEnd))
		}
	}
	return problems
}

func checkContent(id seriesID, p gotPoint, w *pointContent, bad func(seriesID, string, ...any), tf timeFmt) {
	wb := w.buckets
	if wb == nil && p.buckets != nil {
		wb = make([]uint64, len(p.buckets))
	}
	if p.count != w.count || p.valueCount != w.valueCount || !within(p.sum, w.sum, 1e-9*w.sumAbs) ||
		(p.buckets != nil && !slices.Equal(p.buckets, wb)) || (w.valueCount > 0 && (p.min != w.min || p.max != w.max)) {
		bad(id, "point at %s: count %d values %d sum %g min %g max %g buckets %v, want %d %d %g %g %g %v",
			tf.t(p.end), p.count, p.valueCount, p.sum, p.min, p.max, p.buckets, w.count, w.valueCount, w.sum, w.min, w.max, wb)
	}
}

// checkPointExemplars checks the exemplars of a series' points against the records each should hold
// (want, by point timestamp); recs are the scenario's records by number - 1. With revise, which point
// takes a record folded is not worked out here (only that every record is in one point): the
// exemplars are checked against the series' records, and its greatest must be one of them.
func checkPointExemplars(id seriesID, ps []gotPoint, want map[int64]*pointContent, k int, recs []refRec, revise bool,
	bad func(seriesID, string, ...any), tf timeFmt) {
	if revise {
		all := &pointContent{}
		for _, w := range want {
			all.recs = append(all.recs, w.recs...)
		}
		want = map[int64]*pointContent{}
		for _, p := range ps {
			want[p.end] = all
		}
	}
	var held []exemplar.Exemplar // of every point, with revise
	for _, p := range ps {
		if k == 0 {
			if len(p.exemplars) > 0 {
				bad(id, "point at %s has %d exemplars without exemplars configured", tf.t(p.end), len(p.exemplars))
			}
			continue
		}
		in := map[uint64]bool{}
		if w := want[p.end]; w != nil {
			for _, n := range w.recs {
				in[n] = true
			}
		}
		if len(p.exemplars) > k || uint64(len(p.exemplars)) > p.valueCount {
			bad(id, "point at %s with %d values has %d exemplars, at most %d", tf.t(p.end), p.valueCount, len(p.exemplars), k)
		}
		seen := map[uint64]bool{}
		for i, ex := range p.exemplars {
			n := recordOfSpan(ex.TraceID)
			if !in[n] || seen[n] {
				bad(id, "point at %s: exemplar %+v is not a record of it, or is there twice", tf.t(p.end), ex)
				continue
			}
			seen[n] = true
			_, span := spanOf(n)
			if r := recs[n-1]; ex.Value != r.v || ex.Time != r.t || ex.SpanID != span {
				bad(id, "point at %s: exemplar %+v, its record is %+v", tf.t(p.end), ex, r)
			}
			if i > 0 && ex.Time < p.exemplars[i-1].Time {
				bad(id, "point at %s: exemplars not in order of time", tf.t(p.end))
			}
		}
		held = append(held, p.exemplars...)
		if !revise {
			checkHoldsGreatest(id, p.end, p.exemplars, want[p.end], k, recs, bad, tf)
		}
	}
	if revise && k > 0 && len(ps) > 0 {
		seen := map[uint64]bool{}
		for _, ex := range held {
			if n := recordOfSpan(ex.TraceID); seen[n] {
				bad(id, "exemplar %+v in two points", ex)
			} else {
				seen[n] = true
			}
		}
		checkHoldsGreatest(id, ps[len(ps)-1].end, held, want[ps[0].end], 1, recs, bad, tf)
	}
}

// checkHoldsGreatest checks that exemplars exs, of the points at end, number at least as many as
// the records with values there up to k, and hold one with the greatest of their values.
func checkHoldsGreatest(id seriesID, end int64, exs []exemplar.Exemplar, w *pointContent, k int, recs []refRec,
	bad func(seriesID, string, ...any), tf timeFmt) {
	if w == nil || len(w.recs) == 0 {
		if len(exs) > 0 {
			bad(id, "points at %s hold no value, and %d exemplars", tf.t(end), len(exs))
		}
		return
	}
	greatest := math.Inf(-1)
	for _, n := range w.recs {
		greatest = max(greatest, recs[n-1].v)
	}
	has := false
	for _, ex := range exs {
		has = has || ex.Value == greatest
	}
	if len(exs) < min(k, len(w.recs)) || !has {
		bad(id, "points at %s with %d values (greatest %g) have exemplars %+v", tf.t(end), len(w.recs), greatest, exs)
	}
}
