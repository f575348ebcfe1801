package ingest

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// outcome is what became of one record of an ingest call, in one encoding for the engine's verdicts,
// the counters and the late-routing attribute: unmatched (no aggregation selects it), one plus the
// worst verdict of the aggregations that judged it (stream.Verdict is ordered on time, late update,
// expired, future, invalid), for a metric point that its aggregations took without staging a record
// (metric_points counts why) refused or heldBack, or a duplicate.
type outcome uint8

const unmatched outcome = 0

const (
	// refused: a metric point its aggregations left out (a summary, a point without a recorded
	// value, a new stream past max_input_streams).
	refused outcome = outcome(numVerdicts) + 1 + iota
	// heldBack: a metric point taken into an aggregation's input state that adds nothing to its
	// windows (a cumulative stream's base, a point out of order, a histogram with no new value).
	heldBack
	// duplicate: a copy of a record the component has seen, whose identity it remembers (dedup):
	// taken by no aggregation.
	duplicate
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
	value  values.Reason
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
	// ottl are the OTTL errors of the call
	ottl        ottlErrors
	sourceKey   []byte
	traceStates traceStates
	// dedup is the call's dedup stage
	dedup dedupStage
	// byAgg are the call's records by outcome per aggregation (see aggregationCounts), by index
	byAgg []aggregationTally
	// ids are the identifiers of the record being staged for one aggregation's distinct outputs,
	// and idHasher hashes them (see distinctIDs)
	ids      []uint64
	idHasher identityHasher
	run      ingestRun
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release returns the scratch to the pool, dropping its references to the batch's data.
func (sc *scratch) release() {
	sc.traceStates = traceStates{}
	sc.state = sc.state[:0]
	sc.judgedBy = sc.judgedBy[:0]
	sc.faults = sc.faults[:0]
	sc.dedup.reset()
	clear(sc.byAgg)
	sc.ottl.reset()
	sc.run = ingestRun{}
	scratchPool.Put(sc)
}

// stage runs the view's record, at event time t, through the aggregations that select it: each gets
// the record staged in the batch, at its weight, unless the record's time is invalid or in the future,
// or it weighs nothing for the aggregation. A metric point (with run.points) is staged as what it
// adds to each aggregation (metricinput.Adder), worked out once its time is known to be on time: a
// point that adds nothing is held back or refused. The record's outcome is settled by apply.
func (run *ingestRun) stage(aggs []*Aggregation, t int64) {
	r, kb, b, pr := run.r, run.key, run.b, run.points
	rec := &run.rec
	rec.Time, rec.Tag = t, int32(len(run.sc.state))
	st := unmatched
	checked, held, left := false, false, false
	// The time is checked once (vd, judged), at the first aggregation that selects the record, or
	// before that when the record's identity is looked up there.
	vd, judged := stream.OnTime, false
	identified := !run.dd.on() // identities are looked up once, at the first aggregation that selects the record
	at := run.sc.byAgg
	for _, a := range aggs {
		if !a.matches(r) {
			at[a.Index].unmatched++
			continue
		}
		if !identified {
			identified = true
			vd, judged = b.Check(t), true
			if vd == stream.OnTime && run.dd.claim(r.src, t, b) == dedup.Duplicate {
				st = duplicate // before its OTTL, its weight and its input stream: it is none of theirs
				at[a.Index].duplicate++
				break
			}
		}
		it := staged{weight: 1}
		switch {
		case pr != nil:
			if len(a.Conditions) > 0 && !run.anyCondition(a) {
				at[a.Index].unmatched++
				continue
			}
			if pr.refusal != metricinput.Aggregated {
				pr.adds.Refuse(&a.Point, pr.refusal)
				left = true
				continue
			}
		case a.Computed:
			var selected bool
			if it.v, it.why, it.truncated, selected = run.readComputed(a); !selected {
				at[a.Index].unmatched++
				continue
			}
		default:
			it.v, it.why = a.value(r)
			it.truncated = a.BuildKey(kb, r)
		}
		if pr == nil && !a.weighsOne(r) {
			if it.weight, it.whyWeight = a.weigh(r, &run.sc.traceStates); it.weight == 0 {
				continue // a weight below 1 rounded down: it stands for no record here
			}
		}
		if !checked {
			if !judged {
				vd, judged = b.Check(t), true
			}
			if vd != stream.OnTime {
				st = outcomeOf(vd) // future or invalid: staged for no aggregation, a point's streams unmoved
				at[a.Index].late++ // for the aggregation that judged it
				break
			}
			checked = true
		}
		if pr != nil {
			if o := run.addPoint(a, &it); o != metricinput.Aggregated {
				held, left = held || o.Held(), left || !o.Held()
				continue
			}
		}
		if st == unmatched {
			st = outcomeOf(stream.OnTime)
			if t > run.now {
				run.tl.AheadOfClock++ // aggregated, but W does not follow it past the clock
			}
		}
		if it.why != values.OK || it.whyWeight != WeightOK {
			run.sc.faults = append(run.sc.faults, fault{rec.Tag, it.why, it.whyWeight})
		}
		if it.truncated {
			run.tl.Truncated++
		}
		rec.Agg, rec.Key, rec.IDs = a.Index, kb.Key(), nil
		if len(a.Distinct) > 0 { // a check here, not a call per record and aggregation
			rec.IDs = distinctIDs(a, r, rec.TraceID, &run.sc.idHasher, &run.sc.ids)
		}
		if it.dist != nil {
			b.StageDistribution(rec, it.dist)
			continue
		}
		rec.Value, rec.Weight = it.v, it.weight
		b.StageChecked(rec) // its time checked above, once per record
	}
	if st == unmatched {
		switch {
		case held:
			st = heldBack
		case left:
			st = refused
		}
	}
	run.dd.settle(st == outcomeOf(stream.OnTime))
	run.sc.state = append(run.sc.state, st)
}

// staged is what the record being staged adds to one aggregation: a value (NaN: none, why says) at a
// weight (whyWeight: why it is not the configured one), or a distribution; truncated: its key had a
// value cut.
type staged struct {
	v         float64
	why       values.Reason
	weight    uint32
	whyWeight weightReason
	dist      *stream.Distribution
	truncated bool
}

// addPoint works out what the view's metric point adds to aggregation a, by the kind of its metric,
// changing a's input stream of it, into it, with its key; it returns the outcome, metricinput.Aggregated
// unless the point adds nothing. Under metricinput.Inputs.Mu.
func (run *ingestRun) addPoint(a *Aggregation, it *staged) metricinput.Outcome {
	pr := run.points
	pa, p := &pr.adds, &pr.p
	var add metricinput.Add
	switch p.Kind {
	case metricinput.KindCounter:
		add = pa.AddCounter(p, &a.Point, run.in)
	case metricinput.KindHistogram:
		add = pa.AddHistogram(p, &a.Point, run.in)
	case metricinput.KindExponential:
		add = pa.AddExponential(p, &a.Point, run.in)
	case metricinput.KindIncrease:
		add = metricinput.ValueAdd(metricinput.IncreaseOf(p.Num))
	default:
		add = metricinput.ValueAdd(metricinput.NumberOf(p.Num))
	}
	pa.Count(&a.Point, &add)
	if add.Outcome != metricinput.StreamLimit {
		a.Input.Learn(pr.m.Unit(), pr.p.Kind == metricinput.KindIncrease || pr.p.Kind == metricinput.KindCounter)
	}
	if add.Outcome != metricinput.Aggregated {
		return add.Outcome
	}
	it.v, it.why, it.weight, it.dist = add.Value, add.Why, add.Weight, add.Dist
	if a.Computed {
		it.truncated = run.buildComputedKey(a)
	} else {
		it.truncated = a.BuildKey(run.key, run.r)
	}
	return metricinput.Aggregated
}

// finishRun applies the run's records, copies its late ones with lateCopy when action routes them and
// some are late, and finishes the run: the end of Traces, Logs and Metrics.
func finishRun[B any](run *ingestRun, action LateAction, lateCopy func(reasonOf func(int) (string, int64)) B) (late B, routed bool, err error) {
	run.apply()
	if action == LateRouted && run.anyLate {
		late, routed = lateCopy(run.lateReason), true
	}
	return late, routed, run.finish(run.ctx, action)
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
	defer run.ungate()
	run.dd.release()
	run.tl.DedupOverflow += run.dd.overflows
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
			tl.Values[f.value]++
			tl.Weights[f.weight]++
		}
	}
	for _, st := range state {
		v, judged := st.verdict()
		switch {
		case st == duplicate:
			tl.Duplicates++
		case st >= refused: // counted in metric_points
		case !judged:
			tl.Unmatched++
		case v == stream.OnTime:
			tl.Aggregated++
		case v == stream.LateUpdate:
			tl.LateUpdated++
		default:
			tl.Late[v]++
			run.anyLate = true
		}
	}
}

// ungate lets the ingest gate go, if the call holds it.
func (run *ingestRun) ungate() {
	if run.gated {
		run.gated = false
		run.c.Gate.Leave()
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

// setSource names the source of the resource's records for the engine, by its source key
// (sourcekey.go); the records of a source past max_sources are counted as they are staged, until the
// next resource.
func (run *ingestRun) setSource(resource pcommon.Map) {
	run.endSource()
	keys := run.c.PerSource
	if len(keys) == 0 {
		return
	}
	run.sc.sourceKey = appendSourceKey(run.sc.sourceKey[:0], resource, keys)
	if run.b.SetSource(run.sc.sourceKey) {
		run.sharedFrom = len(run.sc.state)
	}
}

// endSource counts the records staged since setSource named a shared source, if it did.
func (run *ingestRun) endSource() {
	if run.sharedFrom >= 0 {
		run.tl.SharedSource += int64(len(run.sc.state) - run.sharedFrom)
		run.sharedFrom = -1
	}
}

// ingestRun is one ingest call: its batch, the view its signal's file fills record by record, its
// tally and its scratch.
type ingestRun struct {
	reading
	c       *Core
	rec     stream.Record // the record being staged, one aggregation after another
	now     int64         // wall time the run began at
	b       *stream.Batch
	tl      tally
	sc      *scratch
	anyLate bool // some record has a late reason
	// sharedFrom is the first record of a source past max_sources, while one is being staged; -1:
	// none
	sharedFrom int
	// points is the view of a call of metric points, and in the metric inputs' state; nil: a call of
	// spans or logs
	points *metricReader
	in     *metricinput.Inputs
	// input is the signal of the call's records; dd its dedup stage (off when they are not
	// deduplicated)
	input int
	dd    *dedupStage
	// gated: the call holds the ingest gate (checkpoint.Checkpointer.Enter) for reading, until its records are applied
	gated bool
}

// beginRun begins an ingest call of input's records, which come through view r; with storage, the
// call of an input that keeps state outside the engine holds the ingest gate until apply.
func (c *Core) beginRun(ctx context.Context, input int, r *Record) *ingestRun {
	sc := getScratch()
	run := &sc.run
	now := c.Engine.Now()
	if len(sc.byAgg) != len(c.Aggs) {
		sc.byAgg = make([]aggregationTally, len(c.Aggs))
	}
	sc.ottl.propagate = c.ErrorMode == ottl.PropagateError
	gated := c.Gate.Enter(input)
	*run = ingestRun{reading: reading{ctx: ctx, r: r, key: &sc.key, errs: &sc.ottl}, c: c, sc: sc, now: now, b: c.Engine.Begin(now), sharedFrom: -1,
		input: input, dd: &sc.dedup, gated: gated}
	sc.dedup.begin(c.DedupOf[input])
	return run
}

// finish lets the batch move the watermark, reports its outcomes, and asks for what fired to be
// collected and sent, which the component's goroutine does.
// It returns the call's OTTL error, with error_mode propagate.
func (run *ingestRun) finish(ctx context.Context, action LateAction) error {
	c, now, err := run.c, run.now, run.sc.ottl.first
	run.ungate()
	countByAggregation(c.ByAgg, run.b, run.sc.byAgg, action)
	run.b.End()
	c.Reporter.report(ctx, &run.tl, run.input, action)
	if len(run.sc.ottl.failures) > 0 {
		c.Reporter.reportOTTL(ctx, run.sc.ottl.failures, c.Aggs, c.ErrorMode)
	}
	run.sc.release() // run is part of the scratch: not to be read after this
	if c.Engine.Due(now) {
		c.Poke()
	}
	return err
}

// Core is what the ingest path reads of the component: its engine and aggregations, what each
// signal's aggregations read, the ingest gate, the metric inputs, the identities of each signal's
// records, the records by outcome per aggregation, and where a call reports.
type Core struct {
	Engine *stream.Engine
	Aggs   []*Aggregation
	// BySignal are the aggregations of each input signal, and what they read of its records
	BySignal [NumInputs]SignalAggs
	// Gate is the ingest gate a checkpoint takes (checkpoint.Checkpointer)
	Gate Gate
	// Inputs is what the metrics aggregations keep of their input streams
	Inputs *metricinput.Inputs
	// DedupOf, by input, the set of the identities of the signal's records aggregated (nil: not
	// deduplicated), and LogKey what identifies a log record
	DedupOf [NumInputs]*dedup.Set
	LogKey  LogKey
	// ByAgg are each aggregation's records by outcome that the engine does not count, by index
	ByAgg []AggregationCounts
	// PerSource are watermark.per_source's keys; ErrorMode is error_mode
	PerSource []string
	ErrorMode ottl.ErrorMode
	// SeriesExpiration is series_expiration in ns; DropAggregatedInput drop_aggregated_input
	SeriesExpiration    int64
	DropAggregatedInput bool
	// Reporter is where a call reports
	Reporter Reporter
	// Poke asks for what fired to be collected and sent
	Poke func()
}

// Gate is the ingest gate: a call of an input that keeps state outside the engine enters it, for
// reading, until its records are applied.
type Gate interface {
	Enter(input int) bool
	Leave()
}
