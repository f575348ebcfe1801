package ingest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// What an ingest call reports once its records are applied: its tally of outcomes, added to the
// counters once per call, and its OTTL errors, counted and logged at a bounded rate.

// report adds the tally of a call of input's records to the counters; action is what happened to
// late records.
func (r *Reporter) report(ctx context.Context, t *tally, input int, action LateAction) {
	tel := r.Telemetry
	if t.Aggregated > 0 {
		tel.WindowAggregatorRecords.Add(ctx, t.Aggregated, attrOutcomeAggregated...)
	}
	if t.LateUpdated > 0 {
		tel.WindowAggregatorRecords.Add(ctx, t.LateUpdated, attrOutcomeLateUpdated...)
	}
	if t.Unmatched > 0 {
		tel.WindowAggregatorRecords.Add(ctx, t.Unmatched, attrOutcomeUnmatched...)
	}
	for v, n := range t.Late {
		if n > 0 {
			tel.WindowAggregatorRecords.Add(ctx, n, attrOutcomeLate...)
			tel.WindowAggregatorLateRecords.Add(ctx, n, lateOptions[v][action]...)
			r.Late[action].Add(n)
		}
	}
	if t.Truncated > 0 {
		tel.WindowAggregatorTruncatedKeys.Add(ctx, t.Truncated)
	}
	if t.AheadOfClock > 0 {
		tel.WindowAggregatorClockSkewRecords.Add(ctx, t.AheadOfClock, attrReasonAheadOfClock...)
	}
	if t.SharedSource > 0 {
		tel.WindowAggregatorSharedSourceRecords.Add(ctx, t.SharedSource)
	}
	if t.Duplicates > 0 {
		tel.WindowAggregatorDuplicateRecords.Add(ctx, t.Duplicates, signalOptions[input]...)
	}
	if t.DedupOverflow > 0 {
		tel.WindowAggregatorDedupOverflow.Add(ctx, t.DedupOverflow, signalOptions[input]...)
	}
	for reason := values.OK + 1; reason < values.NumReasons; reason++ {
		if n := t.Values[reason]; n > 0 {
			tel.WindowAggregatorValuesMissing.Add(ctx, n, valueReasonOptions[reason]...)
		}
	}
	for reason := WeightOK + 1; reason < NumWeightReasons; reason++ {
		if n := t.Weights[reason]; n > 0 {
			tel.WindowAggregatorInvalidWeights.Add(ctx, n, weightReasonOptions[reason]...)
		}
	}
}

// ottlErrorLogInterval bounds how often ignore logs OTTL errors: the first, then at most one line a
// minute with the count since.
const ottlErrorLogInterval = time.Minute

// reportOTTL counts an ingest call's OTTL errors and, with error_mode ignore, logs them at a bounded
// rate.
func (r *Reporter) reportOTTL(ctx context.Context, fs []ottlFailure, aggs []*Aggregation, mode ottl.ErrorMode) {
	for _, f := range fs {
		r.Telemetry.WindowAggregatorOttlErrors.Add(ctx, f.N, r.Telemetry.byAgg[f.Agg].ottl[f.Clause]...)
	}
	if mode != ottl.IgnoreError && mode != "" {
		return
	}
	l := &r.ottlLog
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range fs {
		l.unlogged += f.N
		l.last = f
	}
	if now := time.Now(); l.unlogged > 0 && now.Sub(l.loggedAt) >= ottlErrorLogInterval {
		last := l.last
		r.Logger.Warn("OTTL errors: the records count as error_mode says (ignore: condition false, key or value missing)",
			zap.Int64("errors", l.unlogged), zap.String("aggregation", aggs[last.Agg].Name),
			zap.String("clause", OTTLClauseNames[last.Clause]), zap.Error(last.Last))
		l.unlogged, l.loggedAt = 0, now
	}
}

// reportPoints adds one call's point tallies to the counters.
func (r *Reporter) reportPoints(ctx context.Context, tally []metricinput.Tally) {
	for i := range tally {
		t := &tally[i]
		for o, n := range t.Outcomes {
			if n > 0 {
				r.Telemetry.WindowAggregatorMetricPoints.Add(ctx, n, r.Telemetry.byAgg[i].points[o]...)
			}
		}
		if t.Resets > 0 {
			r.Telemetry.WindowAggregatorInputResets.Add(ctx, t.Resets, r.Telemetry.byAgg[i].name...)
		}
		for f := metricinput.Fits + 1; f < metricinput.NumFaults; f++ {
			if n := t.Incompatible[f]; n > 0 {
				r.Telemetry.WindowAggregatorIncompatibleHistograms.Add(ctx, n, r.Telemetry.byAgg[i].incompatible[f]...)
			}
		}
	}
}

// tally counts one batch's outcomes, so that the counters are touched once per batch.
type tally struct {
	Aggregated, LateUpdated, Unmatched int64
	Truncated                          int64
	AheadOfClock                       int64              // records stamped after the collector's clock, within max_future_skew
	SharedSource                       int64              // records of sources past max_sources
	Late                               [numVerdicts]int64 // by verdict: expired, future, invalid
	Duplicates, DedupOverflow          int64
	Values                             [values.NumReasons]int64
	Weights                            [NumWeightReasons]int64
}

// Reporter is where an ingest call reports once its records are applied: Telemetry are the
// counters; Logger logs OTTL errors at a bounded rate, with error_mode ignore.
type Reporter struct {
	Telemetry *Telemetry
	Logger    *zap.Logger
	ottlLog   ottlLog
	// Late are the late records (expired, future, invalid) by what happened to them, each once
	// whatever the aggregations that judged it, as the records counter counts them: the operator
	// view's late records of the component.
	Late [NumLateActions]atomic.Int64
}

// ottlLog is what reportOTTL has not logged yet, and when it last did.
type ottlLog struct {
	mu       sync.Mutex
	unlogged int64
	last     ottlFailure
	loggedAt time.Time
}
