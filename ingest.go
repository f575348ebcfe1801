package windowaggregator

import (
	"context"
	"encoding/binary"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/windowaggregator/windowaggregator/processor/serieskey"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// The late-data reasons, as counter attributes and as the value of the late-reason attribute, are
// the names of the verdicts.
var (
	reasonExpired = stream.Expired.String()
	reasonFuture  = stream.Future.String()
	reasonInvalid = stream.Invalid.String()
)

// outcome is what became of one record of an ingest call, in one encoding for the engine's verdicts,
// the counters and the late-routing attribute: unmatched (no aggregation selects it), one plus the
// worst verdict of the aggregations that judged it (stream.Verdict is ordered on time, late update,
// expired, future, invalid), or, for a metric point that its aggregations took without staging a
// record (metric_points counts why), refused or heldBack.
type outcome uint8

const unmatched outcome = 0

// numVerdicts sizes the tables indexed by verdict; Invalid is the last.
const numVerdicts = int(stream.Invalid) + 1

const (
	// refused: a metric point its aggregations left out (a summary, a point without a recorded
	// value, a new stream past max_input_streams).
	refused outcome = outcome(numVerdicts) + 1 + iota
	// heldBack: a metric point taken into an aggregation's input state that adds nothing to its
	// windows (a cumulative stream's base, a point out of order, a histogram with no new value).
	heldBack
)

func outcomeOf(v stream.Verdict) outcome { return outcome(v) + 1 }

// verdict returns the record's worst verdict; ok is false for a record that no aggregation judged.
func (o outcome) verdict() (v stream.Verdict, ok bool) {
	return stream.Verdict(o - 1), o != unmatched && o < refused
}

// late reports whether the record is late data: not aggregated, routed or counted by reason.
func (o outcome) late() bool {
	v, ok := o.verdict()
	return ok && !v.Aggregated()
}

// fault is a record staged for one aggregation without a value, or with another weight than the
// configured one, and why; it is counted once the record turns out aggregated.
type fault struct {
	rec    int32
	value  valueReason
	weight weightReason
}

// scratch is what one ingest call reuses: the series-key buffer, the outcome of each record, the
// watermark each expired record was judged by, the source-key buffer, the adjusted count of the last
// tracestate, and the run itself.
type scratch struct {
	key      serieskey.Builder
	state    []outcome
	judgedBy []int64 // by record; filled only once a record of the call has expired
	faults   []fault
	// ottlFailures are the OTTL errors of the call, by aggregation and clause
	ottlFailures []ottlFailure
	sourceKey    []byte
	traceStates  traceStates
	run          ingestRun
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release returns the scratch to the pool, dropping its references to the batch's data.
func (sc *scratch) release() {
	sc.traceStates = traceStates{}
	sc.state = sc.state[:0]
	sc.judgedBy = sc.judgedBy[:0]
	sc.faults = sc.faults[:0]
	clear(sc.ottlFailures)
	sc.ottlFailures = sc.ottlFailures[:0]
	sc.run = ingestRun{}
	scratchPool.Put(sc)
}

// tally counts one batch's outcomes, so that the counters are touched once per batch.
type tally struct {
	aggregated, lateUpdated, unmatched int64
	truncated                          int64
	aheadOfClock                       int64              // records stamped after the collector's clock, within max_future_skew
	sharedSource                       int64              // records of sources past max_sources
	late                               [numVerdicts]int64 // by verdict: expired, future, invalid
	values                             [numValueReasons]int64
	weights                            [numWeightReasons]int64
}

// report adds the tally to the counters; action is what happened to late records.
func (s *shared) report(ctx context.Context, t *tally, action lateAction) {
	tel := s.tel
	if t.aggregated > 0 {
		tel.WindowAggregatorRecords.Add(ctx, t.aggregated, attrOutcomeAggregated...)
	}
	if t.lateUpdated > 0 {
		tel.WindowAggregatorRecords.Add(ctx, t.lateUpdated, attrOutcomeLateUpdated...)
	}
	if t.unmatched > 0 {
		tel.WindowAggregatorRecords.Add(ctx, t.unmatched, attrOutcomeUnmatched...)
	}
	for v, n := range t.late {
		if n > 0 {
			tel.WindowAggregatorRecords.Add(ctx, n, attrOutcomeLate...)
			tel.WindowAggregatorLateRecords.Add(ctx, n, lateOptions[v][action]...)
		}
	}
	if t.truncated > 0 {
		tel.WindowAggregatorTruncatedKeys.Add(ctx, t.truncated)
	}
	if t.aheadOfClock > 0 {
		tel.WindowAggregatorClockSkewRecords.Add(ctx, t.aheadOfClock, attrReasonAheadOfClock...)
	}
	if t.sharedSource > 0 {
		tel.WindowAggregatorSharedSourceRecords.Add(ctx, t.sharedSource)
	}
	for reason := valueOK + 1; reason < numValueReasons; reason++ {
		if n := t.values[reason]; n > 0 {
			tel.WindowAggregatorValuesMissing.Add(ctx, n, valueReasonOptions[reason]...)
		}
	}
	for reason := weightOK + 1; reason < numWeightReasons; reason++ {
		if n := t.weights[reason]; n > 0 {
			tel.WindowAggregatorInvalidWeights.Add(ctx, n, weightReasonOptions[reason]...)
		}
	}
}

// stage runs the view's record, at event time t, through the aggregations that select it: each gets
// the record staged in the batch, at its weight, unless the record's time is invalid or in the future,
// or it weighs nothing for the aggregation. The record's outcome is settled by apply.
func (run *ingestRun) stage(aggs []*aggregation, t int64) {
	r, kb, b := run.r, &run.sc.key, run.b
	rec := &run.rec
	rec.Time, rec.Tag = t, int32(len(run.sc.state))
	st := unmatched
	for _, a := range aggs {
		if !a.matches(r) {
			continue
		}
		var v float64
		var why valueReason
		var truncated bool
		if a.computed {
			var selected bool
			if v, why, truncated, selected = run.readComputed(a); !selected {
				continue
			}
		} else {
			v, why = a.value(r)
			truncated = a.buildKey(kb, r)
		}
		weight, whyWeight := uint32(1), weightOK
		if !a.weighsOne(r) {
			if weight, whyWeight = a.weigh(r, &run.sc.traceStates); weight == 0 {
				continue // a weight below 1 rounded down: it stands for no record here
			}
		}
		if st == unmatched {
			check := b.Check(t)
			st = outcomeOf(check)
			if check != stream.OnTime {
				break // future or invalid: staged for no aggregation
			}
			if t > run.now {
				run.tl.aheadOfClock++ // aggregated, but W does not follow it past the clock
			}
		}
		if why != valueOK || whyWeight != weightOK {
			run.sc.faults = append(run.sc.faults, fault{rec.Tag, why, whyWeight})
		}
		if truncated {
			run.tl.truncated++
		}
		rec.Agg, rec.Key, rec.Value, rec.Weight = a.index, kb.Key(), v, weight
		b.StageChecked(rec) // its time checked above, once per record
	}
	run.sc.state = append(run.sc.state, st)
}

// readComputed reads what an aggregation with OTTL or defaults reads of the view's record: whether its
// conditions select it (any one true), and if so its value and its series key (into the scratch's
// builder). An OTTL error counts as the condition false, the key or the value missing (ottlError).
func (run *ingestRun) readComputed(a *aggregation) (v float64, why valueReason, truncated, selected bool) {
	r := run.r
	if len(a.conditions) > 0 && !run.anyCondition(a) {
		return 0, valueOK, false, false
	}
	if a.valueExpr != nil {
		x, err := a.valueExpr(run.ctx, r)
		if err != nil {
			run.ottlError(a, clauseValue, err)
			x = nil
		}
		v, why = computedNumber(x)
	} else {
		v, why = a.value(r)
	}
	return v, why, run.buildComputedKey(a), true
}

// anyCondition reports whether one of the aggregation's conditions holds for the view's record.
func (run *ingestRun) anyCondition(a *aggregation) bool {
	for _, cond := range a.conditions {
		ok, err := cond(run.ctx, run.r)
		if err != nil {
			run.ottlError(a, clauseWhere, err)
			continue
		}
		if ok {
			return true
		}
	}
	return false
}

// buildComputedKey is buildKey for keys computed by OTTL or with defaults: a value the record lacks
// (an expression giving nil, or failing) takes the key's default, if it has one, else it is absent.
func (run *ingestRun) buildComputedKey(a *aggregation) (truncated bool) {
	b, r := &run.sc.key, run.r
	b.Reset()
	for i := range a.groupBy {
		k, ck := &a.groupBy[i], &a.computedKeys[i]
		switch {
		case ck.expr != nil:
			x, err := ck.expr(run.ctx, r)
			if err != nil {
				run.ottlError(a, clauseGroupBy, err)
				x = nil
			}
			ok, cut := appendComputed(b, x)
			if ok {
				truncated = truncated || cut
				continue
			}
		case k.field >= 0:
			b.Str(serieskey.Record, r.field[k.field])
			continue
		default:
			if v, src, ok := r.lookup(k.name); ok {
				truncated = appendValue(b, src, v) || truncated
				continue
			}
		}
		if ck.hasDef {
			appendValue(b, serieskey.Record, ck.def)
		} else {
			b.Absent()
		}
	}
	return truncated
}

// setIDs sets the trace and span ids of the records staged next, for the aggregations that keep
// exemplars.
func (run *ingestRun) setIDs(trace [16]byte, span [8]byte) {
	run.rec.TraceID, run.rec.SpanID = trace, span
}

// apply adds the staged records and settles every record's outcome, the worst verdict of its
// aggregations: expired if some aggregation found it expired, a late update if some added it to a
// window that had fired.
func (run *ingestRun) apply() {
	run.endSource()
	sc := run.sc
	state := sc.state
	run.b.Apply(func(tag int32, vd stream.Verdict, w int64) {
		state[tag] = max(state[tag], outcomeOf(vd))
		if vd == stream.Expired {
			if len(sc.judgedBy) == 0 {
				sc.judgedBy = append(sc.judgedBy, make([]int64, len(state))...)
			}
			// A record is expired for every aggregation that judged it so; keep the greatest W.
			sc.judgedBy[tag] = max(sc.judgedBy[tag], w)
		}
	})
	tl := &run.tl
	for _, f := range sc.faults {
		if v, ok := state[f.rec].verdict(); ok && v.Aggregated() {
			// values_missing and invalid_weights count aggregated records only
			tl.values[f.value]++
			tl.weights[f.weight]++
		}
	}
	for _, st := range state {
		v, judged := st.verdict()
		switch {
		case st >= refused: // counted in metric_points
		case !judged:
			tl.unmatched++
		case v == stream.OnTime:
			tl.aggregated++
		case v == stream.LateUpdate:
			tl.lateUpdated++
		default:
			tl.late[v]++
			run.anyLate = true
		}
	}
}

// lateReason returns the late reason of record i of the call, or "", and the watermark it was judged
// by: for an expired record the one its aggregations found it expired under, else the batch's.
func (run *ingestRun) lateReason(i int) (string, int64) {
	st := run.sc.state[i]
	if !st.late() {
		return "", 0
	}
	v, _ := st.verdict()
	if v == stream.Expired && i < len(run.sc.judgedBy) && run.sc.judgedBy[i] != 0 {
		return v.String(), run.sc.judgedBy[i]
	}
	return v.String(), run.b.Watermark()
}

// setSource names the source of the resource's records for the engine, by the values of the
// watermark.per_source keys on the resource (a missing key counts as empty); the records of a source
// past max_sources are counted as they are staged, until the next resource.
func (run *ingestRun) setSource(resource pcommon.Map) {
	run.endSource()
	keys := run.s.cfg.Watermark.PerSource
	if len(keys) == 0 {
		return
	}
	k := run.sc.sourceKey[:0]
	for _, key := range keys {
		var v string
		if val, ok := resource.Get(key); ok {
			v = val.AsString()
		}
		k = binary.AppendUvarint(k, uint64(len(v)))
		k = append(k, v...)
	}
	run.sc.sourceKey = k
	if run.b.SetSource(k) {
		run.sharedFrom = len(run.sc.state)
	}
}

// endSource counts the records staged since setSource named a shared source, if it did.
func (run *ingestRun) endSource() {
	if run.sharedFrom >= 0 {
		run.tl.sharedSource += int64(len(run.sc.state) - run.sharedFrom)
		run.sharedFrom = -1
	}
}

// ingestRun is one ingest call: its batch, the view its signal's file fills record by record, its
// tally and its scratch.
type ingestRun struct {
	s   *shared
	ctx context.Context
	r   *record
	// err is the first OTTL error of the call, with error_mode propagate: the call returns it
	err     error
	rec     stream.Record // the record being staged, one aggregation after another
	now     int64         // wall time the run began at
	b       *stream.Batch
	tl      tally
	sc      *scratch
	anyLate bool // some record has a late reason
	// sharedFrom is the first record of a source past max_sources, while one is being staged; -1:
	// none
	sharedFrom int
}

// beginRun begins an ingest call whose records come through view r.
func (s *shared) beginRun(ctx context.Context, r *record) *ingestRun {
	sc := getScratch()
	run := &sc.run
	now := s.engine.Now()
	*run = ingestRun{s: s, ctx: ctx, r: r, sc: sc, now: now, b: s.engine.Begin(now), sharedFrom: -1}
	return run
}

// finish lets the batch move the watermark, reports its outcomes, and asks for what fired to be
// collected and sent, which the component's goroutine does.
// It returns the call's OTTL error, with error_mode propagate.
func (run *ingestRun) finish(ctx context.Context, action lateAction) error {
	s, now, err := run.s, run.now, run.err
	run.b.End()
	s.report(ctx, &run.tl, action)
	if len(run.sc.ottlFailures) > 0 {
		s.reportOTTL(ctx, run.sc.ottlFailures)
	}
	run.sc.release() // run is part of the scratch: not to be read after this
	if s.engine.Due(now) {
		s.emitter.Poke()
	}
	return err
}

// timeOf converts a pdata timestamp to the engine's int64. Anything past 2^62 ns (the year 2116) is
// beyond the engine's range, which rejects it as future.
func timeOf(ts uint64) int64 {
	if ts > 1<<62 {
		return 1 << 62
	}
	return int64(ts)
}
