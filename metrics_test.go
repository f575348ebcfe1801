package windowaggregator

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Metric points as input, through the factories, in both forms: every expectation is worked out by
// hand in the comments. The component's wall clock starts at 1000 s (so it began watching then);
// windows are 10 s, tumbling, with delta points (metricsConfig), so that each point is one window's.

const svcA, svcB = "service.name=a(Str)", "service.name=b(Str)"

// wantPoints checks that metric (with attributes attrs) has exactly these values, window by window
// (by start, in seconds).
func wantPoints(t *testing.T, ps []point, metric, attrs string, want map[int64]float64) {
	t.Helper()
	got := map[int64]float64{}
	for _, p := range find(ps, metric, attrs) {
		if _, dup := got[p.start]; dup {
			t.Errorf("%s{%s}: two points for the window at %d", metric, attrs, p.start)
		}
		got[p.start] = p.value
	}
	for start, v := range want {
		if g, ok := got[start]; !ok || math.Abs(g-v) > 1e-9*math.Abs(v) {
			t.Errorf("%s{%s} at %d = %v (present %v), want %v", metric, attrs, start, g, ok, v)
		}
	}
	for start, g := range got {
		if _, ok := want[start]; !ok {
			t.Errorf("%s{%s} at %d = %v, want no point", metric, attrs, start, g)
		}
	}
}

func gauge(service, pod string, t int64, v float64) inPoint {
	return inPoint{service: service, pod: pod, metric: "queue.depth", kind: inGauge, unit: "{message}", t: t, v: v}
}

// Gauges from three pods, by service:
//
//	a/p1  1001: 4  1005: 6      a: count 3, sum 20, avg 20/3, min 4, max 10
//	a/p2  1002: 10
//	b/p3  1003: 1  1007: 3      b: count 2, sum 4, avg 2, min 1, max 3
//
// A point of service c at 1015 closes [1000, 1010). The value outputs take the input metric's unit.
func TestGaugesFromPodsAggregateByService(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			cfg := metricsConfig(AggregationConfig{Name: "depth", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"queue.depth"}},
				GroupBy: keys("service.name"), Outputs: []string{"count", "sum", "avg", "min", "max"}})
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			r.send(inMetrics(gauge("a", "p1", 1001, 4), gauge("a", "p2", 1002, 10), gauge("b", "p3", 1003, 1),
				gauge("a", "p1", 1005, 6), gauge("b", "p3", 1007, 3)))
			r.at(1020)
			r.send(inMetrics(gauge("c", "p9", 1015, 0)))
			ps := r.points()
			for _, w := range []struct {
				metric string
				a, b   float64
			}{{"depth.count", 3, 2}, {"depth.sum", 20, 4}, {"depth.avg", 20.0 / 3, 2}, {"depth.min", 4, 1}, {"depth.max", 10, 3}} {
				wantPoints(t, ps, w.metric, svcA, map[int64]float64{1000: w.a})
				wantPoints(t, ps, w.metric, svcB, map[int64]float64{1000: w.b})
			}
			eachMetric(r.results.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
				want := "{message}"
				if m.Name() == "depth.count" {
					want = "{value}"
				}
				if m.Unit() != want {
					t.Errorf("%s: unit %q, want %q", m.Name(), m.Unit(), want)
				}
				if m.Name() == "depth.sum" && m.Sum().IsMonotonic() {
					t.Errorf("the sum of gauges is monotonic")
				}
			})
			if got := pointsCounter(t, r.tel, "depth", "aggregated"); got != 6 {
				t.Errorf("metric_points aggregated = %d, want 6", got)
			}
		})
	}
}

func counter(service, pod string, start, t int64, v float64) inPoint {
	return inPoint{service: service, pod: pod, metric: "http.requests", kind: inCounter, unit: "{request}", start: start, t: t, v: v}
}

func counterConfig() *Config {
	return metricsConfig(AggregationConfig{Name: "reqs", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"http.requests"}},
		GroupBy: keys("service.name"), Outputs: []string{"count", "sum"}})
}

// A cumulative counter from three pods; the component began watching at 1000 s.
//
//	p1 (a), start 900:   1005: 100 base (started before 1000)   1008: 130 +30
//	                     1015: 150 +20    1018: 10, start 1017: reset, +10    1025: 25 +15
//	p2 (a), start 1002:  1006: 7 +7 (started while watched: whole)   1016: 17 +10
//	                     1026: 20, start 1024: reset (a later start, though above 17), +20
//	p3 (b), no start:    1004: 50 base    1014: 55 +5    1024: 3: below 55, reset, +3
//
//	a: [1000,1010) 37 (2 points)   [1010,1020) 40 (3)   [1020,1030) 35 (2)
//	b: [1010,1020) 5 (1)           [1020,1030) 3 (1); no point for [1000,1010): a base adds nothing
func TestCumulativeCounterGivesTrueIncreasesAcrossPods(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			r := startMetrics(t, form, counterConfig(), nil)
			r.at(1010)
			r.send(inMetrics(counter("a", "p1", 900, 1005, 100), counter("a", "p1", 900, 1008, 130), counter("a", "p2", 1002, 1006, 7),
				counter("b", "p3", 0, 1004, 50)))
			r.at(1020)
			r.send(inMetrics(counter("a", "p1", 900, 1015, 150), counter("a", "p1", 1017, 1018, 10), counter("a", "p2", 1002, 1016, 17),
				counter("b", "p3", 0, 1014, 55)))
			r.at(1030)
			r.send(inMetrics(counter("a", "p1", 1017, 1025, 25), counter("a", "p2", 1024, 1026, 20), counter("b", "p3", 0, 1024, 3)))
			r.stop()
			ps := r.points()
			wantPoints(t, ps, "reqs.sum", svcA, map[int64]float64{1000: 37, 1010: 40, 1020: 35})
			wantPoints(t, ps, "reqs.count", svcA, map[int64]float64{1000: 2, 1010: 3, 1020: 2})
			wantPoints(t, ps, "reqs.sum", svcB, map[int64]float64{1010: 5, 1020: 3})
			wantPoints(t, ps, "reqs.count", svcB, map[int64]float64{1010: 1, 1020: 1})
			for outcome, want := range map[string]int64{"aggregated": 9, "base": 2, "out_of_order": 0} {
				if got := pointsCounter(t, r.tel, "reqs", outcome); got != want {
					t.Errorf("metric_points %s = %d, want %d", outcome, got, want)
				}
			}
			wantCounter(t, r.tel, "otelcol_window_aggregator_input_resets", map[string]string{"aggregation": "reqs"}, 3)
			wantCounter(t, r.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"}, 9)
			eachMetric(r.results.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
				if m.Name() == "reqs.sum" && (!m.Sum().IsMonotonic() || m.Unit() != "{request}") {
					t.Errorf("reqs.sum: monotonic %v, unit %q; want a monotonic sum of {request}", m.Sum().IsMonotonic(), m.Unit())
				}
			})
		})
	}
}

// An exporter that sends a batch twice (a retry): with dedup the second copy's points are duplicates;
// without, they are at their streams' last times, out of order. Either way they add nothing.
func TestResentCumulativePointsAreNotCountedTwice(t *testing.T) {
	for _, dedup := range []bool{true, false} {
		t.Run(fmt.Sprintf("dedup=%v", dedup), func(t *testing.T) { testResentCumulative(t, dedup) })
	}
}

func testResentCumulative(t *testing.T, dedup bool) {
	{
		cfg := counterConfig()
		cfg.Dedup.Enabled = dedup
		r := startMetrics(t, "connector", cfg, nil)
		r.at(1010)
		batch := inMetrics(counter("a", "p1", 1001, 1002, 3), counter("a", "p1", 1001, 1005, 8))
		r.send(batch)
		r.send(batch)
		r.stop()
		wantPoints(t, r.points(), "reqs.sum", svcA, map[int64]float64{1000: 8})
		// Both points were aggregated (the stream began after the component started: its first
		// point counts whole), so both copies are duplicates.
		wantOutOfOrder, wantDuplicates := int64(0), int64(2)
		if !dedup {
			wantOutOfOrder, wantDuplicates = 2, 0
		}
		if got := pointsCounter(t, r.tel, "reqs", "out_of_order"); got != wantOutOfOrder {
			t.Errorf("dedup %v: metric_points out_of_order = %d, want %d", dedup, got, wantOutOfOrder)
		}
		if got := counterIncluding(t, r.tel, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "metrics"}); got != wantDuplicates {
			t.Errorf("dedup %v: duplicate_records = %d, want %d", dedup, got, wantDuplicates)
		}
	}
}

// max_input_streams 1: the second pod's stream is left out and counted; a gauge needs no stream.
func TestInputStreamsAreBounded(t *testing.T) {
	cfg := counterConfig()
	cfg.MaxInputStreams = 1
	cfg.Aggregations = append(cfg.Aggregations, AggregationConfig{Name: "depth", Signal: "metrics",
		Where: &WhereConfig{MetricNames: []string{"queue.depth"}}, Outputs: []string{"count"}})
	r := startMetrics(t, "connector", cfg, nil)
	r.at(1010)
	r.send(inMetrics(counter("a", "p1", 1001, 1002, 3), counter("a", "p2", 1001, 1003, 5), counter("a", "p2", 1001, 1004, 6),
		gauge("a", "p1", 1002, 1), gauge("a", "p2", 1003, 1)))
	r.stop()
	ps := r.points()
	wantPoints(t, ps, "reqs.sum", svcA, map[int64]float64{1000: 3})
	wantPoints(t, ps, "depth.count", "", map[int64]float64{1000: 2})
	if got := pointsCounter(t, r.tel, "reqs", "stream_limit"); got != 2 {
		t.Errorf("metric_points stream_limit = %d, want 2", got)
	}
}

func hist(service, pod string, t int64, h inHist) inPoint {
	return inPoint{service: service, pod: pod, metric: "http.server.request.duration", kind: inHistogram, unit: "s", t: t, hist: &h}
}

var bounds1510 = []float64{1, 5, 10}

// Delta histograms of explicit buckets (1, 5, 10], by service:
//
//	a/p1  1001: count 3, sum 7,  buckets 1 1 1 0, min 0.5, max 8
//	a/p2  1004: count 2, sum 25, buckets 0 0 1 1, min 6, max 19   a: count 5, sum 32, 1 1 2 1, min 0.5, max 19
//	b/p3  1003: count 4, sum 10, buckets 2 2 0 0 (no min, max)    b: count 4, sum 10, 2 2 0 0, no min or max
//	c/p4  1002: count 2, sum 30, bounds (1, 5, 20], min 3, max 17 c: count 2, sum 30, min 3, max 17, and an
//	                                                              empty histogram: other bounds (counted)
//	d/p5  1005: count 3, buckets 3 0 0 0, no sum                   d: count 3, no values (counted missing)
func TestDeltaHistogramsMergeBucketByBucket(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			cfg := metricsConfig(AggregationConfig{Name: "dur", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"http.server.request.duration"}},
				GroupBy: keys("service.name"), Outputs: []string{"count", "sum", "min", "max", "histogram"},
				Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{1, 5, 10}}}})
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			r.send(inMetrics(
				hist("a", "p1", 1001, inHist{count: 3, sum: 7, bounds: bounds1510, buckets: []uint64{1, 1, 1, 0}, min: 0.5, max: 8, hasMinMax: true}),
				hist("a", "p2", 1004, inHist{count: 2, sum: 25, bounds: bounds1510, buckets: []uint64{0, 0, 1, 1}, min: 6, max: 19, hasMinMax: true}),
				hist("b", "p3", 1003, inHist{count: 4, sum: 10, bounds: bounds1510, buckets: []uint64{2, 2, 0, 0}}),
				hist("c", "p4", 1002, inHist{count: 2, sum: 30, bounds: []float64{1, 5, 20}, buckets: []uint64{0, 0, 1, 1}, min: 3, max: 17, hasMinMax: true}),
				hist("d", "p5", 1005, inHist{count: 3, noSum: true, bounds: bounds1510, buckets: []uint64{3, 0, 0, 0}})))
			r.stop()
			ps := r.points()
			svc := func(x string) string { return "service.name=" + x + "(Str)" }
			wantPoints(t, ps, "dur.count", svc("a"), map[int64]float64{1000: 5})
			wantPoints(t, ps, "dur.sum", svc("a"), map[int64]float64{1000: 32})
			wantPoints(t, ps, "dur.min", svc("a"), map[int64]float64{1000: 0.5})
			wantPoints(t, ps, "dur.max", svc("a"), map[int64]float64{1000: 19})
			wantPoints(t, ps, "dur.count", svc("b"), map[int64]float64{1000: 4})
			wantPoints(t, ps, "dur.min", svc("b"), map[int64]float64{})
			wantPoints(t, ps, "dur.max", svc("b"), map[int64]float64{})
			wantPoints(t, ps, "dur.count", svc("c"), map[int64]float64{1000: 2})
			wantPoints(t, ps, "dur.sum", svc("c"), map[int64]float64{1000: 30})
			wantPoints(t, ps, "dur.min", svc("c"), map[int64]float64{1000: 3})
			wantPoints(t, ps, "dur.count", svc("d"), map[int64]float64{1000: 3})
			wantPoints(t, ps, "dur.min", svc("d"), map[int64]float64{})
			type h struct {
				count   uint64
				sum     float64
				hasSum  bool
				buckets []uint64
			}
			want := map[string]h{
				svc("a"): {5, 32, true, []uint64{1, 1, 2, 1}}, svc("b"): {4, 10, true, []uint64{2, 2, 0, 0}},
				svc("c"): {0, 0, false, []uint64{0, 0, 0, 0}}, svc("d"): {0, 0, true, []uint64{0, 0, 0, 0}},
			}
			seen := 0
			eachHistogram(r.results.AllMetrics(), "dur.histogram", func(attrs string, dp pmetric.HistogramDataPoint) {
				seen++
				w, ok := want[attrs]
				got := h{dp.Count(), dp.Sum(), dp.HasSum(), dp.BucketCounts().AsRaw()}
				if !ok || got.count != w.count || got.hasSum != w.hasSum || got.sum != w.sum || !slices.Equal(got.buckets, w.buckets) ||
					!slices.Equal(dp.ExplicitBounds().AsRaw(), bounds1510) {
					t.Errorf("histogram {%s}: %+v, want %+v", attrs, got, w)
				}
				if attrs == svc("a") && (!dp.HasMin() || dp.Min() != 0.5 || dp.Max() != 19) {
					t.Errorf("histogram {%s}: min %v max %v, want 0.5 and 19", attrs, dp.Min(), dp.Max())
				}
			})
			if seen != len(want) {
				t.Errorf("%d histogram points, want %d", seen, len(want))
			}
			wantCounter(t, r.tel, "otelcol_window_aggregator_incompatible_histograms", map[string]string{"aggregation": "dur", "reason": "other_bounds"}, 1)
			wantCounter(t, r.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "missing"}, 1)
		})
	}
}

// eachHistogram calls fn with every explicit histogram point of metric name, and its attributes.
func eachHistogram(all []pmetric.Metrics, name string, fn func(attrs string, dp pmetric.HistogramDataPoint)) {
	eachMetric(all, func(_ pcommon.Resource, m pmetric.Metric) {
		if m.Name() != name || m.Type() != pmetric.MetricTypeHistogram {
			return
		}
		for i := 0; i < m.Histogram().DataPoints().Len(); i++ {
			dp := m.Histogram().DataPoints().At(i)
			fn(attrString(dp.Attributes()), dp)
		}
	})
}

func eachExponential(all []pmetric.Metrics, name string, fn func(attrs string, dp pmetric.ExponentialHistogramDataPoint)) {
	eachMetric(all, func(_ pcommon.Resource, m pmetric.Metric) {
		if m.Name() != name || m.Type() != pmetric.MetricTypeExponentialHistogram {
			return
		}
		for i := 0; i < m.ExponentialHistogram().DataPoints().Len(); i++ {
			dp := m.ExponentialHistogram().DataPoints().At(i)
			fn(attrString(dp.Attributes()), dp)
		}
	})
}

func expHist(service, pod string, kind inKind, start, t int64, h inHist) inPoint {
	return inPoint{service: service, pod: pod, metric: "rpc.duration", kind: kind, unit: "ms", start: start, t: t, hist: &h}
}

// Delta exponential histograms at scale 0 (bucket i holds (2^i, 2^(i+1)]):
//
//	a/p1  1001: values 1, 2, 3, 4: offset -1, counts 1 1 2, sum 10, min 1, max 4
//	a/p2  1003: values 8, 16:      offset 2,  counts 1 1,   sum 24, min 8, max 16
//
// merged: offset -1, counts 1 1 2 1 1, count 6, sum 34, min 1, max 16, at scale 0. p50 is the 3rd of
// 6 values, in (2, 4]: 2·2·4/(2+4) = 8/3. An aggregation with explicit buckets counts them out of
// its histogram.
func TestExponentialHistogramsMergeAtTheCoarserScale(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			where := &WhereConfig{MetricNames: []string{"rpc.duration"}}
			cfg := metricsConfig(
				AggregationConfig{Name: "rpc", Signal: "metrics", Where: where, GroupBy: keys("service.name"), Outputs: []string{"count", "sum", "p50", "histogram"}},
				AggregationConfig{Name: "rpc_explicit", Signal: "metrics", Where: where, Outputs: []string{"count", "histogram"},
					Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{1, 5, 10}}}})
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			r.send(inMetrics(
				expHist("a", "p1", inExponential, 0, 1001, inHist{count: 4, sum: 10, min: 1, max: 4, hasMinMax: true, offset: -1, buckets: []uint64{1, 1, 2}}),
				expHist("a", "p2", inExponential, 0, 1003, inHist{count: 2, sum: 24, min: 8, max: 16, hasMinMax: true, offset: 2, buckets: []uint64{1, 1}})))
			r.stop()
			ps := r.points()
			wantPoints(t, ps, "rpc.count", svcA, map[int64]float64{1000: 6})
			wantPoints(t, ps, "rpc.sum", svcA, map[int64]float64{1000: 34})
			wantPoints(t, ps, "rpc.p50", svcA, map[int64]float64{1000: 8.0 / 3})
			n := 0
			eachExponential(r.results.AllMetrics(), "rpc.histogram", func(attrs string, dp pmetric.ExponentialHistogramDataPoint) {
				n++
				if attrs != svcA || dp.Scale() != 0 || dp.Positive().Offset() != -1 || !slices.Equal(dp.Positive().BucketCounts().AsRaw(), []uint64{1, 1, 2, 1, 1}) ||
					dp.Count() != 6 || dp.Sum() != 34 || dp.Min() != 1 || dp.Max() != 16 || dp.ZeroCount() != 0 {
					t.Errorf("{%s}: scale %d offset %d counts %v count %d sum %v min %v max %v", attrs, dp.Scale(), dp.Positive().Offset(),
						dp.Positive().BucketCounts().AsRaw(), dp.Count(), dp.Sum(), dp.Min(), dp.Max())
				}
			})
			if n != 1 {
				t.Errorf("%d exponential histogram points, want 1", n)
			}
			wantPoints(t, ps, "rpc_explicit.count", "", map[int64]float64{1000: 6})
			eachHistogram(r.results.AllMetrics(), "rpc_explicit.histogram", func(attrs string, dp pmetric.HistogramDataPoint) {
				if dp.Count() != 0 || dp.HasSum() {
					t.Errorf("explicit histogram of exponential inputs: count %d, has sum %v; want none of them", dp.Count(), dp.HasSum())
				}
			})
			wantCounter(t, r.tel, "otelcol_window_aggregator_incompatible_histograms", map[string]string{"aggregation": "rpc_explicit", "reason": "other_kind"}, 2)
			if n := counterIncluding(t, r.tel, "otelcol_window_aggregator_incompatible_histograms", map[string]string{"aggregation": "rpc"}); n != 0 {
				t.Errorf("incompatible_histograms{aggregation=rpc} = %d, want 0", n)
			}
		})
	}
}

func cumHist(service, pod string, start, t int64, h inHist) inPoint {
	return inPoint{service: service, pod: pod, metric: "http.server.request.duration", kind: inCumulativeHistogram, unit: "s", start: start, t: t, hist: &h}
}

// Cumulative histograms, bucket by bucket, explicit (1, 5, 10] and exponential at scale 0:
//
//	p1, start 1002: 1005: count 2, sum 3, 1 1 0 0, min 1, max 2: whole (started while watched)
//	                1015: count 5, sum 13, 1 2 2 0: +3, +10, 0 1 2 0
//	                1025, start 1020: count 1, sum 0.5, 1 0 0 0: reset, whole
//	p2, start 900:  1006: count 10, sum 100, 2 3 4 1: base     1016: count 12, sum 120, 2 3 4 3: +2, +20, 0 0 0 2
//	                1026: count 12, sum 121, 3 3 4 2: a bucket below its last count: reset, whole
//
//	[1000,1010) count 2, sum 3, 1 1 0 0, min 1, max 2; [1010,1020) count 5, sum 30, 0 1 2 2, no min or max;
//	[1020,1030) count 13, sum 121.5, 4 3 4 2, no min or max (p2's point has none)
//
// exponential, p3, start 1002: 1005: values 1.5, 2.5 (offset 0, 1 1), sum 4: whole; 1015: offset 0,
// 1 3, sum 10: +2 in (2, 4], +6; 1025: offset 0, 3 2, sum 12: a bucket below its last, reset, whole.
func TestCumulativeHistogramsGiveTheirIncreases(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			cfg := metricsConfig(
				AggregationConfig{Name: "dur", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"http.server.request.duration"}},
					Outputs: []string{"count", "sum", "min", "max", "histogram"}, Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{1, 5, 10}}}},
				AggregationConfig{Name: "rpc", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"rpc.duration"}},
					Outputs: []string{"count", "sum", "histogram"}})
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			r.send(inMetrics(
				cumHist("a", "p1", 1002, 1005, inHist{count: 2, sum: 3, bounds: bounds1510, buckets: []uint64{1, 1, 0, 0}, min: 1, max: 2, hasMinMax: true}),
				cumHist("a", "p2", 900, 1006, inHist{count: 10, sum: 100, bounds: bounds1510, buckets: []uint64{2, 3, 4, 1}}),
				expHist("a", "p3", inCumulativeExponential, 1002, 1005, inHist{count: 2, sum: 4, offset: 0, buckets: []uint64{1, 1}})))
			r.at(1020)
			r.send(inMetrics(
				cumHist("a", "p1", 1002, 1015, inHist{count: 5, sum: 13, bounds: bounds1510, buckets: []uint64{1, 2, 2, 0}, min: 1, max: 7, hasMinMax: true}),
				cumHist("a", "p2", 900, 1016, inHist{count: 12, sum: 120, bounds: bounds1510, buckets: []uint64{2, 3, 4, 3}}),
				expHist("a", "p3", inCumulativeExponential, 1002, 1015, inHist{count: 4, sum: 10, offset: 0, buckets: []uint64{1, 3}})))
			r.at(1030)
			r.send(inMetrics(cumHist("a", "p1", 1020, 1025, inHist{count: 1, sum: 0.5, bounds: bounds1510, buckets: []uint64{1, 0, 0, 0}, min: 0.5, max: 0.5, hasMinMax: true}),
				cumHist("a", "p2", 900, 1026, inHist{count: 12, sum: 121, bounds: bounds1510, buckets: []uint64{3, 3, 4, 2}}),
				expHist("a", "p3", inCumulativeExponential, 1002, 1025, inHist{count: 5, sum: 12, offset: 0, buckets: []uint64{3, 2}})))
			r.stop()
			ps := r.points()
			wantPoints(t, ps, "dur.count", "", map[int64]float64{1000: 2, 1010: 5, 1020: 13})
			wantPoints(t, ps, "dur.sum", "", map[int64]float64{1000: 3, 1010: 30, 1020: 121.5})
			wantPoints(t, ps, "dur.min", "", map[int64]float64{1000: 1})
			wantPoints(t, ps, "dur.max", "", map[int64]float64{1000: 2})
			want := map[int64][]uint64{1000: {1, 1, 0, 0}, 1010: {0, 1, 2, 2}, 1020: {4, 3, 4, 2}}
			eachHistogram(r.results.AllMetrics(), "dur.histogram", func(_ string, dp pmetric.HistogramDataPoint) {
				start := int64(dp.StartTimestamp()) / s
				if w := want[start]; !slices.Equal(dp.BucketCounts().AsRaw(), w) {
					t.Errorf("histogram at %d: %v, want %v", start, dp.BucketCounts().AsRaw(), w)
				}
				delete(want, start)
			})
			if len(want) > 0 {
				t.Errorf("no histogram points at %v", want)
			}
			wantPoints(t, ps, "rpc.count", "", map[int64]float64{1000: 2, 1010: 2, 1020: 5})
			wantPoints(t, ps, "rpc.sum", "", map[int64]float64{1000: 4, 1010: 6, 1020: 12})
			eachExponential(r.results.AllMetrics(), "rpc.histogram", func(_ string, dp pmetric.ExponentialHistogramDataPoint) {
				if int64(dp.StartTimestamp())/s == 1010 && (dp.Positive().Offset() != 1 || !slices.Equal(dp.Positive().BucketCounts().AsRaw(), []uint64{2})) {
					t.Errorf("exponential increase: offset %d counts %v, want 2 in (2, 4]", dp.Positive().Offset(), dp.Positive().BucketCounts().AsRaw())
				}
			})
			wantCounter(t, r.tel, "otelcol_window_aggregator_input_resets", map[string]string{"aggregation": "dur"}, 2)
			wantCounter(t, r.tel, "otelcol_window_aggregator_input_resets", map[string]string{"aggregation": "rpc"}, 1)
		})
	}
}

// Summaries, and points without a recorded value, are counted and not aggregated.
func TestSummariesAndNoRecordedValuesAreCountedOnly(t *testing.T) {
	r := startMetrics(t, "connector", counterConfig(), nil)
	r.at(1010)
	noValue := counter("a", "p1", 1001, 1004, 50)
	noValue.noValue = true
	r.send(inMetrics(counter("a", "p1", 1001, 1002, 3), noValue,
		inPoint{service: "a", pod: "p2", metric: "http.requests", kind: inSummary, t: 1003, v: 7}))
	r.stop()
	wantPoints(t, r.points(), "reqs.sum", svcA, map[int64]float64{1000: 3})
	for outcome, want := range map[string]int64{"aggregated": 1, "summary": 1, "no_recorded_value": 1} {
		if got := pointsCounter(t, r.tel, "reqs", outcome); got != want {
			t.Errorf("metric_points %s = %d, want %d", outcome, got, want)
		}
	}
	wantCounter(t, r.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "unmatched"}, 0)
}

// drop_aggregated_input: the processor removes the points it took (aggregated, or taken as a base),
// and passes on the rest: a metric no aggregation names, a summary, a point too late for its window.
//
//	batch 1: a/p1 http.requests 1001 (base: started at 900) and 1005 (aggregated): removed;
//	         a/p1 other 1002: passed; b/p2 http.requests, a summary: passed
//	batch 2: a/p1 http.requests 1025: removed; W = 1025
//	batch 3: c/p3 http.requests 1003: expired, passed (late_records expired passed)
func TestDropAggregatedInputRemovesWhatWasTaken(t *testing.T) {
	cfg := counterConfig()
	cfg.DropAggregatedInput = true
	r := startMetrics(t, "processor", cfg, nil)
	r.at(1010)
	r.send(inMetrics(counter("a", "p1", 900, 1001, 10), counter("a", "p1", 900, 1005, 15),
		inPoint{service: "a", pod: "p1", metric: "other", kind: inGauge, t: 1002, v: 1},
		inPoint{service: "b", pod: "p2", metric: "http.requests", kind: inSummary, t: 1003, v: 2}))
	r.at(1030)
	r.send(inMetrics(counter("a", "p1", 900, 1025, 20)))
	r.send(inMetrics(counter("c", "p3", 1002, 1003, 4)))
	passed := r.passed.AllMetrics()
	var got []string
	for _, md := range passed {
		eachMetric([]pmetric.Metrics{md}, func(res pcommon.Resource, m pmetric.Metric) {
			svc, _ := res.Attributes().Get("service.name")
			got = append(got, svc.Str()+"/"+m.Name()+"/"+m.Type().String())
		})
	}
	want := []string{"a/other/Gauge", "b/http.requests/Summary", "c/http.requests/Sum"}
	if !slices.Equal(got, want) {
		t.Errorf("passed on %v, want %v (the second batch, all taken, not at all)", got, want)
	}
	if !r.comp.(consumer.Metrics).Capabilities().MutatesData {
		t.Error("a processor that drops points must say it mutates data")
	}
	r.stop()
	wantPoints(t, r.points(), "reqs.sum", svcA, map[int64]float64{1000: 5, 1020: 5})
	wantCounter(t, r.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "expired", "action": "passed"}, 1)
}

// A pod whose exporter is 20 s late: its points land in their own window, as a late firing within
// allowed_lateness (30 s); a point later than that is counted and dropped (passed on, by the
// processor).
//
//	p1, start 1001: 1002: 5 (whole)  1008: 9 (+4)  1015: 12 (+3)       [1000,1010) fires at W = 1015: 9
//	p2, start 1001, sent at 1021: 1003: 2 (whole)  1007: 6 (+4)          late firing of [1000,1010): +6, 2 points
//	p1 1045: 20 (+8): W = 1045, [1010,1020) fires: 3; [1000,1010) expires (1010 + 30 <= 1045)
//	p2 1009: 10 (+4), sent then: expired
func TestALatePodsPointsLandInTheirOwnWindow(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			cfg := counterConfig()
			cfg.AllowedLateness = 30 * time.Second
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			r.send(inMetrics(counter("a", "p1", 1001, 1002, 5), counter("a", "p1", 1001, 1008, 9)))
			r.at(1020)
			r.send(inMetrics(counter("a", "p1", 1001, 1015, 12)))
			r.at(1021)
			r.send(inMetrics(counter("a", "p2", 1001, 1003, 2), counter("a", "p2", 1001, 1007, 6)))
			r.at(1050)
			r.send(inMetrics(counter("a", "p1", 1001, 1045, 20)))
			r.send(inMetrics(counter("a", "p2", 1001, 1009, 10)))
			r.stop()
			var first, late []float64
			for _, p := range find(r.points(), "reqs.sum", svcA) {
				if p.start == 1000 {
					first = append(first, p.value)
				}
			}
			if len(first) == 2 {
				late = first[1:]
				first = first[:1]
			}
			if !slices.Equal(first, []float64{9}) || !slices.Equal(late, []float64{6}) {
				t.Errorf("[1000,1010): points %v then %v, want 9 then the late firing's 6", first, late)
			}
			wantPoints(t, filterStart(r.points(), 1010, 1040), "reqs.sum", svcA, map[int64]float64{1010: 3, 1040: 8})
			action := "dropped"
			if form == "processor" {
				action = "passed"
			}
			wantCounter(t, r.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "expired", "action": action}, 1)
			wantCounter(t, r.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "late_updated"}, 2)
		})
	}
}

// filterStart keeps the points whose window starts at one of starts.
func filterStart(ps []point, starts ...int64) []point {
	var out []point
	for _, p := range ps {
		if slices.Contains(starts, p.start) {
			out = append(out, p)
		}
	}
	return out
}

// The component's results are never its input, whatever their names: an aggregation that names its
// own output metrics takes none of its results, in either form, nor another component's.
func TestResultsAreNeverAggregatedAgain(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			cfg := metricsConfig(AggregationConfig{Name: "depth", Signal: "metrics",
				Where:   &WhereConfig{MetricNames: []string{"queue.depth", "depth.sum", "depth.count"}},
				Outputs: []string{"count", "sum"}})
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			r.send(inMetrics(gauge("a", "p1", 1001, 4), gauge("a", "p1", 1005, 6)))
			r.at(1020)
			r.send(inMetrics(gauge("a", "p1", 1015, 1)))
			before := len(r.points())
			for _, md := range r.results.AllMetrics() {
				r.send(md) // results, fed back as input
			}
			r.stop()
			ps := r.points()
			wantPoints(t, ps, "depth.count", "", map[int64]float64{1000: 2, 1010: 1})
			wantPoints(t, ps, "depth.sum", "", map[int64]float64{1000: 10, 1010: 1})
			if before == 0 || pointsCounter(t, r.tel, "depth", "aggregated") != 3 {
				t.Errorf("%d results before; metric_points aggregated = %d, want 3", before, pointsCounter(t, r.tel, "depth", "aggregated"))
			}
		})
	}
}

// A restart with storage keeps each stream's base and when the component began watching: the
// increase across the restart is counted once, and a stream that began between the two starts counts
// whole.
//
//	run 1 (from 1000): p1, start 900: 1005: 100 base, 1008: 130 (+30), 1015: 150 (+20); [1000,1010) = 30
//	run 2 (from 1030): p1 1025: 175 (+25); p2, start 1012: 1026: 4 (whole: after 1000); p1 1035: 180 (+5)
//	[1010,1020) = 20, [1020,1030) = 29, [1030,1040) = 5
func TestRestartWithStorageKeepsTheStreams(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			st := &memStorage{data: map[string][]byte{}}
			host := hostWith{storageID: st}
			cfg := counterConfig()
			cfg.Storage = &storageID
			r := startMetrics(t, form, cfg, host)
			r.at(1010)
			r.send(inMetrics(counter("a", "p1", 900, 1005, 100), counter("a", "p1", 900, 1008, 130)))
			r.at(1020)
			r.send(inMetrics(counter("a", "p1", 900, 1015, 150)))
			r.stop()
			first := r.points()

			r.clk.Set(time.Unix(1030, 0))
			r2 := startMetrics(t, form, cfg, host)
			r2.send(inMetrics(counter("a", "p1", 900, 1025, 175), counter("a", "p2", 1012, 1026, 4)))
			r2.at(1040)
			r2.send(inMetrics(counter("a", "p1", 900, 1035, 180)))
			r2.at(1050)
			r2.send(inMetrics(counter("a", "p1", 900, 1045, 180)))
			r2.stop() // with storage, [1040,1050) is checkpointed, not fired
			all := append(first, r2.points()...)
			wantPoints(t, all, "reqs.sum", svcA, map[int64]float64{1000: 30, 1010: 20, 1020: 29, 1030: 5})
		})
	}
}

// An input stream is forgotten once the watermark is series_expiration (30 s) past its last point;
// a stream seen afterwards counts whole only if it started after every forgotten stream's last point
// (it cannot be one of them).
//
//	p1, start 900:  1001: 10 base, 1005: 14 (+4); forgotten when W passes 1035
//	p9 drives W:    1002 ... 1100
//	p1 again 1105: 20, start 900: base (started before the component)
//	p2, start 1003: first seen at 1104: 5, base (it may be a forgotten one: it started before 1005)
//	p3, start 1050: first seen at 1106: 7, whole
func TestForgottenStreamsComeBackAsBases(t *testing.T) {
	cfg := counterConfig()
	cfg.SeriesExpiration = 30 * time.Second
	r := startMetrics(t, "connector", cfg, nil)
	r.at(1010)
	r.send(inMetrics(counter("a", "p1", 900, 1001, 10), counter("a", "p1", 900, 1005, 14), counter("b", "p9", 1000, 1002, 1)))
	if n, _ := gaugeValue(t, r.tel, "otelcol_window_aggregator_input_streams", "aggregation", "reqs"); n != 2 {
		t.Errorf("input_streams = %v, want 2", n)
	}
	for sec := int64(1020); sec <= 1100; sec += 10 {
		r.at(sec)
		r.send(inMetrics(counter("b", "p9", 1000, sec, float64(sec-1000))))
	}
	if n, _ := gaugeValue(t, r.tel, "otelcol_window_aggregator_input_streams", "aggregation", "reqs"); n != 1 {
		t.Errorf("input_streams = %v after W passed p1's last point by 30 s, want 1", n)
	}
	r.at(1110)
	r.send(inMetrics(counter("a", "p1", 900, 1105, 20), counter("a", "p2", 1003, 1104, 5), counter("a", "p3", 1050, 1106, 7)))
	r.stop()
	wantPoints(t, r.points(), "reqs.sum", svcA, map[int64]float64{1000: 4, 1100: 7})
	if got := pointsCounter(t, r.tel, "reqs", "base"); got != 3 {
		t.Errorf("metric_points base = %d, want 3 (p1 twice, p2)", got)
	}
}

// where.attributes and OTTL on metric points: the datapoint context, and metric.name as a key.
//
//	a/p1 1001 GET 500: 3   selected
//	a/p1 1002 POST 500: 4  not: method
//	a/p1 1003 GET 200: 5   not: the condition
//	b/p2 1004 GET 503: 6   selected
func TestMetricPointsSelectedByAttributesAndOTTL(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			cfg := metricsConfig(AggregationConfig{Name: "errs", Signal: "metrics",
				Where: &WhereConfig{MetricNames: []string{"http.requests"}, Attributes: map[string]any{"method": "GET"},
					Conditions: []string{`datapoint.attributes["code"] >= 500`}},
				GroupBy: []GroupByKey{{Key: "metric.name"}, {Key: "svc", OTTL: `resource.attributes["service.name"]`}}, Outputs: []string{"count", "sum"}})
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			pt := func(svc, pod string, ts int64, method string, code int, v float64) inPoint {
				return inPoint{service: svc, pod: pod, metric: "http.requests", kind: inDeltaSum, t: ts, v: v,
					attrs: map[string]any{"method": method, "code": code}}
			}
			r.send(inMetrics(pt("a", "p1", 1001, "GET", 500, 3), pt("a", "p1", 1002, "POST", 500, 4), pt("a", "p1", 1003, "GET", 200, 5),
				pt("b", "p2", 1004, "GET", 503, 6)))
			r.stop()
			ps := r.points()
			for svc, v := range map[string]float64{"a": 3, "b": 6} {
				attrs := "metric.name=http.requests(Str),svc=" + svc + "(Str)"
				wantPoints(t, ps, "errs.sum", attrs, map[int64]float64{1000: v})
				wantPoints(t, ps, "errs.count", attrs, map[int64]float64{1000: 1})
			}
		})
	}
}
