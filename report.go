package windowaggregator

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// What an ingest call reports once its records are applied: its tally of outcomes, added to the
// counters once per call, and its OTTL errors, counted and logged at a bounded rate.

// Report adds the tally of a call of input's records to the counters; action is what happened to
// late records.
func (s *shared) Report(ctx context.Context, t *ingest.Tally, input int, action ingest.Action) {
	tel := s.tel
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
	for reason := ingest.WeightOK + 1; reason < ingest.NumWeightReasons; reason++ {
		if n := t.Weights[reason]; n > 0 {
			tel.WindowAggregatorInvalidWeights.Add(ctx, n, weightReasonOptions[reason]...)
		}
	}
}

// ottlErrorLogInterval bounds how often ignore logs OTTL errors: the first, then at most one line a
// minute with the count since.
const ottlErrorLogInterval = time.Minute

// ReportOTTL counts an ingest call's OTTL errors and, with error_mode ignore, logs them at a bounded
// rate.
func (s *shared) ReportOTTL(ctx context.Context, fs []ingest.OTTLFailure) {
	for _, f := range fs {
		s.tel.WindowAggregatorOttlErrors.Add(ctx, f.N, s.tel.byAgg[f.Agg].ottl[f.Clause]...)
	}
	if s.cfg.ErrorMode != ottl.IgnoreError && s.cfg.ErrorMode != "" {
		return
	}
	s.ottlLogMu.Lock()
	defer s.ottlLogMu.Unlock()
	for _, f := range fs {
		s.ottlUnlogged += f.N
		s.ottlLast = f
	}
	if now := time.Now(); s.ottlUnlogged > 0 && now.Sub(s.ottlLoggedAt) >= ottlErrorLogInterval {
		last := s.ottlLast
		s.logger.Warn("OTTL errors: the records count as error_mode says (ignore: condition false, key or value missing)",
			zap.Int64("errors", s.ottlUnlogged), zap.String("aggregation", s.Aggs[last.Agg].Name),
			zap.String("clause", ingest.OTTLClauseNames[last.Clause]), zap.Error(last.Last))
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
