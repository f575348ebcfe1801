package windowaggregator

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Weights through the factories: spans sampled at thresholds written into their tracestate, logs
// weighed by an attribute, fractional weights, and weights that cannot be read. Every expectation is
// worked out by hand in the comments.

// Thresholds and the adjusted counts they give (2^56 / (2^56 - threshold)).
const (
	sampledHalf    = "ot=th:8"              // 2
	sampledQuarter = "ot=th:c"              // 4
	sampledEighth  = "ot=th:e"              // 8
	sampledAll     = "ot=th:0"              // 1
	sampledTwoIn5  = "ot=th:9999999999999a" // 2.5
)

// weightedConfig is a 10 s tumbling window with delta points (baseConfig) and three span
// aggregations of one series each: "lat" weighed by adjusted count (the default) with explicit
// buckets at 10 ms and 100 ms, "exp" likewise with an exponential histogram, and "raw" with weight:
// none.
func weightedConfig() *Config {
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{
		{Name: "lat", Signal: "spans", Outputs: []string{"count", "sum", "avg", "min", "max", "p50", "p90", "p99", "histogram"},
			Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{"10ms", "100ms"}}}},
		{Name: "exp", Signal: "spans", Outputs: []string{"count", "histogram"}},
		{Name: "raw", Signal: "spans", Weight: "none", Outputs: []string{"count", "sum"}},
	}
	return cfg
}

// Five spans in [0, 10 s) sampled at four thresholds, and one at 12 s that closes the window:
//
//	span  duration  tracestate                 weight
//	A     5 ms      ot=th:8                    2
//	B     50 ms     ot=th:c                    4
//	C     500 ms    (none)                     1
//	D     20 ms     ot=th:e                    8
//	E     5 ms      vendor=x,ot=th:0;rv:…      1
//
// count 16; sum 2×5 + 4×50 + 500 + 8×20 + 5 = 875; avg 875/16 = 54.6875; min 5, max 500. Buckets
// (≤10, ≤100, >100 ms): A+E = 3, B+D = 12, C = 1. The durations repeated by weight, sorted: 5 5 5,
// 20 ×8, 50 ×4, 500: p50 is rank ceil(0.5×16)−1 = 7, 20 ms; p90 rank 14, 50 ms; p99 rank 15, 500 ms.
// Unweighted: count 5, sum 580.
func TestMixedThresholdsInOneWindow(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, weightedConfig(), false)
	h.sendTraces(traces(
		spanSpec{service: "a", name: "A", end: 1, ms: 5, traceState: sampledHalf},
		spanSpec{service: "a", name: "B", end: 2, ms: 50, traceState: sampledQuarter},
		spanSpec{service: "a", name: "C", end: 3, ms: 500},
		spanSpec{service: "a", name: "D", end: 4, ms: 20, traceState: sampledEighth},
		spanSpec{service: "a", name: "E", end: 5, ms: 5, traceState: "vendor=x,ot=th:0;rv:abcdef01234567"},
	))
	h.sendTraces(traces(spanSpec{service: "a", name: "close", end: 12, ms: 1}))
	ps := points(h.metrics.AllMetrics())
	for metric, want := range map[string]float64{
		"lat.count": 16, "lat.sum": 875, "lat.avg": 54.6875, "lat.min": 5, "lat.max": 500, "exp.count": 16,
		"raw.count": 5, "raw.sum": 580,
	} {
		wantPoint(t, ps, metric, "", 0, 10, want)
	}
	for metric, want := range map[string]float64{"lat.p50": 20, "lat.p90": 50, "lat.p99": 500} {
		if p := wantPointNear(t, ps, metric, 0, 10, want, 0.01); p.typ != pmetric.MetricTypeGauge {
			t.Fatalf("%s is a %v", metric, p.typ)
		}
	}
	hist := wantPoint(t, ps, "lat.histogram", "", 0, 10, 16)
	if hist.sum != 875 || !slices.Equal(hist.buckets, []uint64{3, 12, 1}) {
		t.Fatalf("lat.histogram: sum %v buckets %v, want 875 [3 12 1]", hist.sum, hist.buckets)
	}
	// The exponential histogram: one bucket per duration, holding its weight.
	counts := exponentialCounts(t, h.metrics.AllMetrics(), "exp.histogram", 10)
	slices.Sort(counts)
	if !slices.Equal(counts, []uint64{1, 3, 4, 8}) {
		t.Fatalf("exp.histogram bucket counts %v, want 1 (500 ms), 3 (5 ms), 4 (50 ms), 8 (20 ms)", counts)
	}
	// The records counter counts spans, not weights.
	wantCounter(t, h.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"}, 6)
}

// wantPointNear is wantPoint for a value known within a relative error rel (a percentile).
func wantPointNear(t *testing.T, ps []point, metric string, start, end int64, want, rel float64) point {
	t.Helper()
	got := find(ps, metric, "")
	if len(got) != 1 || got[0].start != start || got[0].end != end || math.Abs(got[0].value-want) > rel*want {
		t.Fatalf("%s: %+v, want one point [%d,%d) = %v within %v", metric, got, start, end, want, rel)
	}
	return got[0]
}

// exponentialCounts returns the non-zero bucket counts of the exponential histogram point of metric
// at end (seconds), positive and negative.
func exponentialCounts(t *testing.T, all []pmetric.Metrics, metric string, end int64) []uint64 {
	t.Helper()
	var out []uint64
	n := 0
	eachMetric(all, func(_ pcommon.Resource, m pmetric.Metric) {
		if m.Name() != metric {
			return
		}
		dps := m.ExponentialHistogram().DataPoints()
		for d := 0; d < dps.Len(); d++ {
			if dp := dps.At(d); int64(dp.Timestamp())/s == end {
				n++
				for _, c := range append(dp.Positive().BucketCounts().AsRaw(), dp.Negative().BucketCounts().AsRaw()...) {
					if c > 0 {
						out = append(out, c)
					}
				}
			}
		}
	})
	if n != 1 {
		t.Fatalf("%s: %d points at %d s, want 1", metric, n, end)
	}
	return out
}

// Weights in cumulative totals and in late records folded into the next point.
func TestWeightsInCumulativeTotalsAndLateRecords(t *testing.T) {
	useFakeClock(t)
	cfg := createDefaultConfig().(*Config) // cumulative, fold
	cfg.Window.Size = 10 * time.Second
	cfg.AllowedLateness = 10 * time.Second
	cfg.Emit.Interval = time.Hour
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", Outputs: []string{"count", "sum"}}}
	h := newConnectorHarness(t, cfg, true)
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 10, traceState: sampledQuarter})) // 4
	h.sendTraces(traces(spanSpec{service: "a", end: 12, ms: 1, traceState: sampledHalf}))    // 2; W = 12: [0,10) fires
	h.sendTraces(traces(spanSpec{service: "a", end: 5, ms: 100, traceState: sampledEighth})) // late within lateness: 8, folded
	h.sendTraces(traces(spanSpec{service: "a", end: 21, ms: 1}))                             // 1; W = 21: [10,20) fires
	ps := points(h.metrics.AllMetrics())
	// At 10: 4 spans of 10 ms. At 20: 4 + 2 + 8 = 14, sum 40 + 2 + 800 = 842.
	for _, c := range []struct {
		metric string
		end    int64
		want   float64
	}{{"lat.count", 10, 4}, {"lat.sum", 10, 40}, {"lat.count", 20, 14}, {"lat.sum", 20, 842}} {
		got := find(ps, c.metric, "")
		i := slices.IndexFunc(got, func(p point) bool { return p.end == c.end })
		if i < 0 || got[i].start != 0 || got[i].value != c.want {
			t.Fatalf("%s at %d: %+v, want start 0 and %v", c.metric, c.end, got, c.want)
		}
	}
}

// logWeights is an attribute weight on logs: each log record stands for sample.rate records.
func logWeights() *Config {
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "bytes", Signal: "logs", Value: ValueConfig{Source: "attribute:size"}, Weight: "attribute:sample.rate",
		Outputs: []string{"count", "sum", "avg"}}}
	return cfg
}

// An attribute weight on logs, as an int, a string holding a number and a double; a record without
// it weighs 1, counted. count 10 + 3 + 4 + 1 = 18; sum 100×10 + 10×3 + 1×4 + 1000 = 2034; avg 113.
func TestAttributeWeightOnLogs(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, logWeights(), false)
	h.sendLogs(logs(
		logSpec{service: "a", ts: 1, attrs: map[string]any{"size": 100, "sample.rate": 10}},
		logSpec{service: "a", ts: 2, attrs: map[string]any{"size": 10, "sample.rate": "3"}},
		logSpec{service: "a", ts: 3, attrs: map[string]any{"size": 1, "sample.rate": 4.0}},
		logSpec{service: "a", ts: 4, attrs: map[string]any{"size": 1000}},
	))
	h.sendLogs(logs(logSpec{service: "a", ts: 12, attrs: map[string]any{"size": 1, "sample.rate": 1}}))
	ps := points(h.metrics.AllMetrics())
	wantPoint(t, ps, "bytes.count", "", 0, 10, 18)
	wantPoint(t, ps, "bytes.sum", "", 0, 10, 2034)
	wantPoint(t, ps, "bytes.avg", "", 0, 10, 113)
	wantCounter(t, h.tel, "otelcol_window_aggregator_invalid_weights", map[string]string{"reason": "missing"}, 1)
}

// Weights that cannot be read weigh 1 and are counted by reason; one too large weighs 2^32 − 1.
func TestUnreadableWeightsWeighOneAndAreCounted(t *testing.T) {
	t.Run("tracestate", func(t *testing.T) {
		useFakeClock(t)
		h := newConnectorHarness(t, weightedConfig(), false)
		h.sendTraces(traces(
			spanSpec{service: "a", end: 1, ms: 1, traceState: "ot=th:zz"},  // not a threshold
			spanSpec{service: "a", end: 2, ms: 1, traceState: "garbage!!"}, // not a W3C tracestate
			spanSpec{service: "a", end: 3, ms: 1, traceState: "ot=th:"},    // an empty threshold
			spanSpec{service: "a", end: 4, ms: 1, traceState: "foo=bar"},   // no threshold: 1, and fine
		))
		h.sendTraces(traces(spanSpec{service: "a", end: 12, ms: 1}))
		wantPoint(t, points(h.metrics.AllMetrics()), "lat.count", "", 0, 10, 4)
		// Three malformed tracestates, each counted for the two aggregations weighed by them.
		wantCounter(t, h.tel, "otelcol_window_aggregator_invalid_weights", map[string]string{"reason": "malformed_tracestate"}, 6)
	})
	t.Run("attribute", func(t *testing.T) {
		useFakeClock(t)
		h := newConnectorHarness(t, logWeights(), false)
		rate := func(ts float64, r any) logSpec {
			return logSpec{service: "a", ts: ts, attrs: map[string]any{"size": 1, "sample.rate": r}}
		}
		h.sendLogs(logs(rate(1, "abc"), rate(1.1, true), rate(2, math.NaN()), rate(3, math.Inf(1)), rate(4, -2), rate(5, 0),
			rate(6, 1e12)))
		h.sendLogs(logs(rate(12, 1)))
		// Six weigh 1, the last 4294967295.
		wantPoint(t, points(h.metrics.AllMetrics()), "bytes.count", "", 0, 10, 6+4294967295)
		for reason, n := range map[string]int64{"not_numeric": 2, "not_finite": 2, "not_positive": 2, "too_large": 1} {
			wantCounter(t, h.tel, "otelcol_window_aggregator_invalid_weights", map[string]string{"reason": reason}, n)
		}
	})
}

// Fractional weights: 4000 spans sampled at 40% (adjusted count 2.5) and 4000 log records of weight
// 2.5 each count 2 or 3, so that the total is 10000 in expectation: each rounding adds a Bernoulli(0.5)
// to 2, of variance 0.25, and the total's standard deviation is sqrt(4000 × 0.25) = 31.6. The test
// takes 5 standard deviations (158; a sound rounding fails it with probability 6e-7). The rounding
// is drawn from the record, so the same records sent again, in other batches and in another order,
// give the same total exactly.
func TestFractionalWeightsAreRoundedFromTheRecord(t *testing.T) {
	const n = 4000
	spans := make([]spanSpec, n)
	logRecords := make([]logSpec, n)
	for i := range spans {
		end := 1 + float64(i)/1000 // 1 ms apart, in [1 s, 5 s)
		spans[i] = spanSpec{service: "a", end: end, ms: 1, id: uint64(i + 1), traceState: sampledTwoIn5}
		logRecords[i] = logSpec{service: "a", ts: end, attrs: map[string]any{"size": 1, "sample.rate": 2.5}}
	}
	cfg := func() *Config {
		c := baseConfig()
		c.Aggregations = []AggregationConfig{
			{Name: "lat", Signal: "spans", Outputs: []string{"count"}},
			{Name: "bytes", Signal: "logs", Value: ValueConfig{Source: "attribute:size"}, Weight: "attribute:sample.rate", Outputs: []string{"count"}},
		}
		return c
	}
	run := func(t *testing.T, batches int, shuffle uint64) (spanCount, logCount float64) {
		useFakeClock(t)
		h := newConnectorHarness(t, cfg(), false)
		ss, ls := slices.Clone(spans), slices.Clone(logRecords)
		if shuffle != 0 {
			rng := rand.New(rand.NewPCG(shuffle, 1))
			rng.Shuffle(n, func(i, j int) { ss[i], ss[j] = ss[j], ss[i] })
			rng.Shuffle(n, func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
		}
		for b := range batches {
			lo, hi := b*n/batches, (b+1)*n/batches
			h.sendTraces(traces(ss[lo:hi]...))
			h.sendLogs(logs(ls[lo:hi]...))
		}
		h.sendTraces(traces(spanSpec{service: "a", end: 12, ms: 1}))
		h.sendLogs(logs(logSpec{service: "a", ts: 12}))
		ps := points(h.metrics.AllMetrics())
		spanCount = wantPointAt(t, ps, "lat.count", 10)
		logCount = wantPointAt(t, ps, "bytes.count", 10)
		h.shutdown()
		return spanCount, logCount
	}
	var first [2]float64
	t.Run("one batch", func(t *testing.T) {
		sc, lc := run(t, 1, 0)
		for what, got := range map[string]float64{"spans": sc, "logs": lc} {
			if math.Abs(got-10000) > 158 {
				t.Errorf("%s: total %v, want 10000 ± 158 (5 standard deviations)", what, got)
			}
			if got == 8000 || got == 12000 {
				t.Errorf("%s: total %v: every record rounded the same way", what, got)
			}
		}
		first = [2]float64{sc, lc}
	})
	t.Run("again, in 7 shuffled batches", func(t *testing.T) {
		sc, lc := run(t, 7, 99)
		if [2]float64{sc, lc} != first {
			t.Errorf("totals (spans, logs) %v, first run %v: the rounding must be the records' own", [2]float64{sc, lc}, first)
		}
	})
}

// wantPointAt returns the value of the one point of metric (no attributes) at end.
func wantPointAt(t *testing.T, ps []point, metric string, end int64) float64 {
	t.Helper()
	got := find(ps, metric, "")
	if len(got) != 1 || got[0].end != end {
		t.Fatalf("%s: %+v, want one point at %d", metric, got, end)
	}
	return got[0].value
}

// A log record whose weight is below 1 stands for that fraction of a record: rounded down to none,
// it is not aggregated (counted as unmatched), and the others count 1.
func TestWeightBelowOneRoundsToNoneOrOne(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, logWeights(), false)
	var ls []logSpec
	for i := range 2000 {
		ls = append(ls, logSpec{service: "a", ts: 1 + float64(i)/1000, attrs: map[string]any{"size": 1, "sample.rate": 0.25}})
	}
	h.sendLogs(logs(ls...))
	h.sendLogs(logs(logSpec{service: "a", ts: 12, attrs: map[string]any{"size": 1}}))
	// 2000 × 0.25 = 500 in expectation, standard deviation sqrt(2000 × 0.25 × 0.75) = 19.4; 5 of them: 97.
	got := wantPointAt(t, points(h.metrics.AllMetrics()), "bytes.count", 10)
	if math.Abs(got-500) > 97 {
		t.Fatalf("count %v, want 500 ± 97", got)
	}
	unmatched := counterValue(t, h.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "unmatched"})
	if unmatched != 2000-int64(got) {
		t.Fatalf("unmatched records %d, want the %d rounded to none", unmatched, 2000-int64(got))
	}
}

// A span whose start timestamp is 0 has no duration (its end since 1970 is not one): it is counted by
// count alone, under values_missing{reason=no_start}.
func TestSpanWithoutStartHasNoDuration(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", Outputs: []string{"count", "sum", "max", "histogram"}}}
	h := newConnectorHarness(t, cfg, false)
	td := traces(spanSpec{service: "a", name: "/x", end: 4, ms: 10})
	noStart := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	noStart.SetEndTimestamp(pcommon.Timestamp(5 * s))
	h.sendTraces(td)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 12, ms: 1}))
	ps := points(h.metrics.AllMetrics())
	wantPoint(t, ps, "lat.count", "", 0, 10, 2)
	wantPoint(t, ps, "lat.sum", "", 0, 10, 10)
	wantPoint(t, ps, "lat.max", "", 0, 10, 10)
	wantPoint(t, ps, "lat.histogram", "", 0, 10, 1)
	wantCounter(t, h.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "no_start"}, 1)
}

// A cumulative series whose first record comes late and is folded starts at the first window it
// had data in, whenever its point is collected: the README's worked example (10 s tumbling,
// allowed_lateness 5 s). svc-a at 12 (W = 12), svc-b at 3 (late: folded into its next point), svc-a
// at 16 (W passes 15: svc-b's window [0, 10) is gone), svc-a at 21 (W = 21): svc-b's count point at
// 20 is 1 from 0; svc-a's is 2 from 10.
func TestFoldedFirstRecordStartsItsSeries(t *testing.T) {
	for _, settleEach := range []bool{true, false} {
		t.Run(map[bool]string{true: "collected after each batch", false: "collected at the end"}[settleEach], func(t *testing.T) {
			useFakeClock(t)
			cfg := createDefaultConfig().(*Config)
			cfg.Window.Size = 10 * time.Second
			cfg.AllowedLateness = 5 * time.Second
			cfg.Emit.Interval = time.Hour
			cfg.Aggregations = []AggregationConfig{{Name: "req", Signal: "spans", GroupBy: keys("service.name")}}
			h := newConnectorHarness(t, cfg, true)
			for _, sp := range []spanSpec{{service: "svc-a", end: 12}, {service: "svc-b", end: 3}, {service: "svc-a", end: 16}, {service: "svc-a", end: 21}} {
				td := traces(sp)
				if settleEach {
					h.sendTraces(td)
					continue
				}
				for _, c := range h.traces {
					must(t, c(context.Background(), td))
				}
			}
			settleAll(t)
			ps := points(h.metrics.AllMetrics())
			wantPoint(t, ps, "req.count", "service.name=svc-b(Str)", 0, 20, 1)
			wantPoint(t, ps, "req.count", "service.name=svc-a(Str)", 10, 20, 2)
		})
	}
}
