package windowaggregator

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Records by outcome per aggregation, as the operator's view reads them, worked out by hand. Two
// aggregations of spans: "all", and "servers" (span_kind server); 10 s windows, 5 s allowed
// lateness, the connector with a late pipeline (late records routed).
//   - Batch 1 (judged against no W): server span 1 at 1 s, client span 2 at 2 s. all: 2 on time;
//     servers: 1 on time, 1 unmatched.
//   - Batch 2: span 1 again, a duplicate found at "all", the first aggregation that selects it
//     (servers never sees it); client span 3 at 16 s, on time for all, unmatched for servers; W 16.
//   - Batch 3: server span 4 at 3 s: [0,10) expired at W 15, for both: routed.
//
// all: 3 on time, 1 routed, 1 duplicate, 0 unmatched; servers: 1 on time, 1 routed, 0 duplicates,
// 2 unmatched.
func TestViewCountsRecordsByAggregation(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.AllowedLateness = 5 * time.Second
	cfg.Aggregations = []AggregationConfig{
		{Name: "all", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count"}},
		{Name: "servers", Signal: "spans", Where: &WhereConfig{SpanKind: []string{"server"}}, GroupBy: keys("service.name"), Outputs: []string{"count"}},
	}
	h := newConnectorHarness(t, cfg, true)
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 1, id: 1, kind: ptrace.SpanKindServer}, spanSpec{service: "a", end: 2, ms: 1, id: 2, kind: ptrace.SpanKindClient}))
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 1, id: 1, kind: ptrace.SpanKindServer}, spanSpec{service: "a", end: 16, ms: 1, id: 3, kind: ptrace.SpanKindClient}))
	h.sendTraces(traces(spanSpec{service: "a", end: 3, ms: 1, id: 4, kind: ptrace.SpanKindServer}))
	got := viewOf(t).Aggregations
	want := []RecordCounts{{OnTime: 3, LateRouted: 1, Duplicate: 1}, {OnTime: 1, LateRouted: 1, Unmatched: 2}}
	if len(got) != 2 {
		t.Fatalf("aggregations %+v", got)
	}
	for i, w := range want {
		if got[i].Records != w {
			t.Errorf("%s: %+v, want %+v", got[i].Name, got[i].Records, w)
		}
	}
}
