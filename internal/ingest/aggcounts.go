package ingest

import (
	"sync/atomic"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// Records by outcome per aggregation, for the operator's view: what the engine does not judge (a
// record the aggregation does not select, a duplicate, found at the first aggregation that selects
// it) and late records, by what became of them. On time, late updates and expired records the
// engine counts (stream.Engine.Verdicts).

// aggregationTally is one call's counts for one aggregation: records it did not select, duplicates
// found at it, and records it judged future or invalid.
type aggregationTally struct {
	unmatched, duplicate, late int64
}

// AggregationCounts are an aggregation's counts since the component started.
type AggregationCounts struct {
	Unmatched, Duplicate atomic.Int64
	Late                 [NumLateActions]atomic.Int64 // expired, future or invalid, by what became of them
}

// countByAggregation adds a call's counts to each aggregation's (byAgg), with its expired records,
// which batch b has judged, under the call's late action.
func countByAggregation(byAgg []AggregationCounts, b *stream.Batch, t []aggregationTally, action LateAction) {
	for i := range t {
		c := &byAgg[i]
		if n := t[i].unmatched; n > 0 {
			c.Unmatched.Add(n)
		}
		if n := t[i].duplicate; n > 0 {
			c.Duplicate.Add(n)
		}
		if n := t[i].late + int64(b.Verdicts(i, stream.Expired)); n > 0 {
			c.Late[action].Add(n)
		}
	}
}
