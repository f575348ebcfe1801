package windowaggregator

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// What an ingest call reports once its records are applied: its tally of outcomes, added to the
// counters once per call, and its OTTL errors, counted and logged at a bounded rate.

// Report adds the tally of a call of input's records to the counters; action is what happened to
// late records.
func (s *shared) Report(ctx context.Context, t *tally, input int, action lateAction) {
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

// ReportOTTL counts an ingest call's OTTL errors and, with error_mode ignore, logs them at a bounded
// rate.
func (s *shared) ReportOTTL(ctx context.Context, fs []ottlFailure) {
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

// ReportPoints adds one call's point tallies to the counters.
func (s *shared) ReportPoints(ctx context.Context, tally []metricinput.Tally) {
	for i := range tally {
		t := &tally[i]
		for o, n := range t.Outcomes {
			if n > 0 {
				s.tel.WindowAggregatorMetricPoints.Add(ctx, n, s.tel.byAgg[i].points[o]...)
			}
		}
		if t.Resets > 0 {
			s.tel.WindowAggregatorInputResets.Add(ctx, t.Resets, s.tel.byAgg[i].name...)
		}
		for f := metricinput.Fits + 1; f < metricinput.NumFaults; f++ {
			if n := t.Incompatible[f]; n > 0 {
				s.tel.WindowAggregatorIncompatibleHistograms.Add(ctx, n, s.tel.byAgg[i].incompatible[f]...)
			}
		}
	}
}
