package windowaggregator

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// At start the component logs the README's memory formula for its configuration.
func TestStartLogsTheMemoryEstimate(t *testing.T) {
	cfg := baseConfig()
	cfg.Window.Size = time.Minute
	cfg.AllowedLateness = 30 * time.Second
	cfg.Watermark.MaxOutOfOrderness = 5 * time.Second
	cfg.Aggregations = []AggregationConfig{
		{Name: "lat", Signal: "spans", GroupBy: keys("service.name", "span.name"), Outputs: []string{"count", "p99"}},
		{Name: "n", Signal: "spans"},
	}
	fields := loggedEstimate(t, cfg)
	// P = (60 + 30 + 5 + 300) s / 60 s + 1 = 7 panes.
	// lat: 10001 × (550 + 2 × 64 + 7 × (168 + 1024)) = 10001 × 9022; n: 10001 × (550 + 7 × 168) = 10001 × 1726.
	// Pending points, sums and gauges: 100000 × 345. Dedup's default 5,000,000 identities at 12 bytes
	// (internal/dedup: an 8-byte entry in tables at least 72% full, rounded up).
	const dedupBytes = 5_000_000 * 12
	want := map[string]int64{"panes_per_series": 7, "bytes.lat": 10001 * 9022, "bytes.n": 10001 * 1726, "bytes.dedup": dedupBytes,
		"bytes": 10001*(9022+1726) + dedupBytes, "bytes.pending_points": 100000 * 345}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("%s = %v, want %d", k, fields[k], v)
		}
	}
	cfg.Dedup.Enabled = false
	fields = loggedEstimate(t, cfg)
	if _, ok := fields["bytes.dedup"]; ok || fields["bytes"] != int64(10001*(9022+1726)) {
		t.Errorf("without dedup: bytes %v, bytes.dedup %v; want %d and none", fields["bytes"], fields["bytes.dedup"], 10001*(9022+1726))
	}
	cfg.Dedup.Enabled = true

	// Accumulators: stddev and stdvar 40 bytes each a pane, a distinct output its registers (12,288)
	// and 64: 10001 × (550 + 7 × (168 + 40 + 40 + 12352)) = 10001 × 88750.
	cfg.Aggregations = []AggregationConfig{{Name: "s", Signal: "spans", Outputs: []string{"stddev", "stdvar", "distinct:user.id"}}}
	if fields = loggedEstimate(t, cfg); fields["bytes.s"] != int64(10001*88750) {
		t.Errorf("accumulators: bytes.s = %v, want %d", fields["bytes.s"], 10001*88750)
	}
	// Early results of a tumbling window add what they sent to an accrual (200, as revise makes
	// none otherwise): 100 and a sketch for an exponential histogram. P = (60 + 30 + 5 + 300) / 60 + 1
	// = 7: 10001 × (550 + 200 + 100 + 1024 + 7 × (168 + 2 × 1024)) = 10001 × 17386.
	cfg.Window.EarlyResults = 10 * time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "x", Signal: "spans", Outputs: []string{"histogram"}}}
	if fields = loggedEstimate(t, cfg); fields["bytes.x"] != int64(10001*17386) {
		t.Errorf("early results: bytes.x = %v, want %d", fields["bytes.x"], 10001*17386)
	}
	cfg.Window.EarlyResults = 0

	// Cumulative, with an explicit histogram of 4 bounds (5 counts, 40 bytes) and an exponential one.
	cfg.Temporality, cfg.LateFirings = temporalityCumulative, lateFold
	cfg.Aggregations = []AggregationConfig{
		{Name: "h", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"histogram"},
			Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{"1ms", "2ms", "3ms", "4ms"}}}},
		{Name: "e", Signal: "spans", Outputs: []string{"histogram"}},
	}
	fields = loggedEstimate(t, cfg)
	// h: 10001 × (550 + 64 + (200 + 40) + 7 × (168 + 40)) = 10001 × 2310;
	// e: 10001 × (550 + (200 + 1024) + 7 × (168 + 1024)) = 10001 × 10118 (no late-delta sketch when folding).
	// Pending points: the exponential histogram's at max_size 160, 345 + 17 × 160 / 2 = 1705
	// bytes, against the explicit one's 345 + 19 × 5.
	want = map[string]int64{"bytes.h": 10001 * 2310, "bytes.e": 10001 * 10118, "bytes.pending_points": 100000 * 1705}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("cumulative: %s = %v, want %d", k, fields[k], v)
		}
	}

	// With 5 exemplars a point, h's panes hold two reservoirs (210 bytes) and 4 exemplars of 55
	// bytes, its accrual one reservoir (112) and 4 more: 10001 × (2310 + 7 × 430 + 332) = 10001 × 5652.
	cfg.Aggregations[0].Exemplars = ExemplarsConfig{Enabled: true}
	fields = loggedEstimate(t, cfg)
	if want := int64(10001 * 5652); fields["bytes.h"] != want {
		t.Errorf("exemplars, cumulative: bytes.h = %v, want %d", fields["bytes.h"], want)
	}
	// Delta points with late firings that revise: no accrual, and a pane's late delta has 4
	// exemplars of its own: 10001 × (550 + 64 + 7 × (168 + 2 × 40 + 210 + 2 × 220)) = 10001 × 6900.
	// h's point carries 5 exemplars of 150 bytes: 345 + 19 × 5 + 750 = 1190 bytes.
	cfg.Temporality, cfg.LateFirings = temporalityDelta, lateRevise
	cfg.Aggregations = cfg.Aggregations[:1]
	fields = loggedEstimate(t, cfg)
	want = map[string]int64{"bytes.h": 10001 * 6900, "bytes.pending_points": 100000 * 1190}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("exemplars, revise: %s = %v, want %d", k, fields[k], v)
		}
	}
}

// A metrics aggregation adds what it keeps per input stream: max_input_streams × (130, + 8 a count
// of its explicit buckets, + 340 for an exponential histogram when it keeps a sketch).
func TestMemoryEstimateCountsInputStreams(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxInputStreams = 1000
	where := &WhereConfig{MetricNames: []string{"m"}}
	cfg.Aggregations = []AggregationConfig{
		{Name: "c", Signal: "metrics", Where: where, Outputs: []string{"sum"}},
		{Name: "h", Signal: "metrics", Where: where, Outputs: []string{"histogram"},
			Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{1, 2, 3}}}},
		{Name: "e", Signal: "metrics", Where: where, Outputs: []string{"p99"}},
	}
	fields := loggedEstimate(t, cfg)
	// P = (10 + 0 + 0 + 300) s / 10 s + 1 = 32; delta, revise: no accrual.
	// c: 10001 × (550 + 32 × 168) + 1000 × 130
	// h: 10001 × (550 + 32 × (168 + 2 × 32)) + 1000 × (130 + 32)
	// e: 10001 × (550 + 32 × (168 + 1024)) + 1000 × (130 + 340)
	want := map[string]int64{"bytes.c": 10001*(550+32*168) + 1000*130, "bytes.h": 10001*(550+32*(168+64)) + 1000*162,
		"bytes.e": 10001*(550+32*(168+1024)) + 1000*470}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("%s = %v, want %d", k, fields[k], v)
		}
	}
}

// loggedEstimate starts a connector on cfg and returns the fields of its memory estimate log line.
func loggedEstimate(t *testing.T, cfg *Config) map[string]any {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	set := connectortest.NewNopSettings(Type)
	set.Logger = zap.New(core)
	c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, new(consumertest.MetricsSink))
	must(t, err)
	must(t, c.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { must(t, c.Shutdown(context.Background())) }()
	entries := logs.FilterMessageSnippet("memory estimate").All()
	if len(entries) != 1 {
		t.Fatalf("%d memory estimate log lines, want 1", len(entries))
	}
	return entries[0].ContextMap()
}
