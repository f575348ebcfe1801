package windowaggregator

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// What an ingest call reports once its records are applied: its tally of outcomes, added to the
// counters once per call, and its OTTL errors, counted and logged at a bounded rate.

// tally counts one batch's outcomes, so that the counters are touched once per batch.
type tally struct {
	aggregated, lateUpdated, unmatched int64
	truncated                          int64
	aheadOfClock                       int64              // records stamped after the collector's clock, within max_future_skew
	sharedSource                       int64              // records of sources past max_sources
	late                               [numVerdicts]int64 // by verdict: expired, future, invalid
	duplicates, dedupOverflow          int64
	values                             [values.NumReasons]int64
	weights                            [numWeightReasons]int64
}

// report adds the tally of a call of input's records to the counters; action is what happened to
// late records.
func (s *shared) report(ctx context.Context, t *tally, input int, action lateAction) {
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
	if t.duplicates > 0 {
		tel.WindowAggregatorDuplicateRecords.Add(ctx, t.duplicates, signalOptions[input]...)
	}
	if t.dedupOverflow > 0 {
		tel.WindowAggregatorDedupOverflow.Add(ctx, t.dedupOverflow, signalOptions[input]...)
	}
	for reason := values.OK + 1; reason < values.NumReasons; reason++ {
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

// ottlErrorLogInterval bounds how often ignore logs OTTL errors: the first, then at most one line a
// minute with the count since.
const ottlErrorLogInterval = time.Minute

// reportOTTL counts an ingest call's OTTL errors and, with error_mode ignore, logs them at a bounded
// rate.
func (s *shared) reportOTTL(ctx context.Context, fs []ottlFailure) {
	for _, f := range fs {
		s.tel.WindowAggregatorOttlErrors.Add(ctx, f.n, s.tel.byAgg[f.agg].ottl[f.clause]...)
	}
	if s.cfg.ErrorMode != ottl.IgnoreError && s.cfg.ErrorMode != "" {
		return
	}
	s.ottlLogMu.Lock()
	defer s.ottlLogMu.Unlock()
	for _, f := range fs {
		s.ottlUnlogged += f.n
		s.ottlLast = f
	}
	if now := time.Now(); s.ottlUnlogged > 0 && now.Sub(s.ottlLoggedAt) >= ottlErrorLogInterval {
		last := s.ottlLast
		s.logger.Warn("OTTL errors: the records count as error_mode says (ignore: condition false, key or value missing)",
			zap.Int64("errors", s.ottlUnlogged), zap.String("aggregation", s.aggs[last.agg].name),
			zap.String("clause", ottlClauseNames[last.clause]), zap.Error(last.last))
		s.ottlUnlogged, s.ottlLoggedAt = 0, now
	}
}
