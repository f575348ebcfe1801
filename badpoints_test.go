package windowaggregator

import (
	"math"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// Metric points that break the data model, through the factories, in both forms: each is taken in
// bounded time, without a panic, into the outputs where it is well defined, and counted with its
// reason. Every expectation is worked out by hand, beside what the good points alone give. The
// windows are 10 s, tumbling, with delta points (metricsConfig); the wall clock starts at 1000 s.

// badRun sends pts in one batch to a component of cfg in form, started at 1000 s, and returns it
// stopped (every window fired).
func badRun(t *testing.T, form string, cfg *Config, pts ...inPoint) *metricsRun {
	t.Helper()
	if clk, ok := testClocks.Load(t); ok {
		clk.(*clock.Fake).Set(time.Unix(1000, 0))
	}
	r := startMetrics(t, form, cfg, nil)
	r.at(1010)
	r.send(inMetrics(pts...))
	r.stop()
	return r
}

// incompatible reads incompatible_histograms of an aggregation and reason.
func incompatible(t *testing.T, r *metricsRun, agg, reason string) int64 {
	t.Helper()
	return counterValue(t, r.tel, "otelcol_window_aggregator_incompatible_histograms", map[string]string{"aggregation": agg, "reason": reason})
}

var boundsBad = []float64{0.1, 0.5, 1, 5}

// Explicit histograms, bounds (0.1, 0.5, 1, 5], of one service:
//
//	p1 1001  count 3, sum 1.2, counts [1 1 1 0 0]                     good
//	p2 1002  count 6, sum 6,   counts [1 1 1 1 1 1]  (six)            bucket_counts: it crashed the collector
//	p3 1003  count 4, sum 2,   counts [2 2]          (two)            bucket_counts: it went into buckets 0 and 1
//	p4 1004  count 2, sum 1,   bounds [0.5 0.1 1 5]  (descending)     bounds
//	p5 1005  count 1, sum 0.3, bounds [0.1 NaN 1 5]                   bounds
//	p6 1006  count 1, sum 7,   bounds [0.1 0.5 1 +Inf]                bounds
//
// count 3+6+4+2+1+1 = 17, sum 1.2+6+2+1+0.3+7 = 17.5; the histogram holds p1 alone: count 3, counts
// [1 1 1 0 0], and no sum (it holds 3 of the 17 values). p1 alone: count 3, sum 1.2, the histogram
// count 3, sum 1.2.
func TestMalformedExplicitHistogramsCountButAreNotBucketed(t *testing.T) {
	h := func(pod string, ts int64, count uint64, sum float64, bounds []float64, counts ...uint64) inPoint {
		return inPoint{service: "a", pod: pod, metric: "d", kind: inHistogram, t: ts, hist: &inHist{count: count, sum: sum, bounds: bounds, buckets: counts}}
	}
	good := h("p1", 1001, 3, 1.2, boundsBad, 1, 1, 1, 0, 0)
	bad := []inPoint{
		h("p2", 1002, 6, 6, boundsBad, 1, 1, 1, 1, 1, 1),
		h("p3", 1003, 4, 2, boundsBad, 2, 2),
		h("p4", 1004, 2, 1, []float64{0.5, 0.1, 1, 5}, 1, 1, 0, 0, 0),
		h("p5", 1005, 1, 0.3, []float64{0.1, math.NaN(), 1, 5}, 0, 1, 0, 0, 0),
		h("p6", 1006, 1, 7, []float64{0.1, 0.5, 1, math.Inf(1)}, 0, 0, 0, 0, 1),
	}
	cfg := func() *Config {
		return metricsConfig(AggregationConfig{Name: "h", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"d"}},
			GroupBy: keys("service.name"), Outputs: []string{"count", "sum", "histogram"},
			Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{0.1, 0.5, 1, 5}}}})
	}
	type hist struct {
		count   uint64
		sum     float64
		hasSum  bool
		buckets []uint64
	}
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			for _, c := range []struct {
				name        string
				pts         []inPoint
				count, sum  float64
				hist        hist
				counts, bnd int64
			}{
				{"good alone", []inPoint{good}, 3, 1.2, hist{3, 1.2, true, []uint64{1, 1, 1, 0, 0}}, 0, 0},
				{"with the malformed", append([]inPoint{good}, bad...), 17, 17.5, hist{3, 0, false, []uint64{1, 1, 1, 0, 0}}, 2, 3},
			} {
				r := badRun(t, form, cfg(), c.pts...)
				ps := r.points()
				wantPoints(t, ps, "h.count", svcA, map[int64]float64{1000: c.count})
				wantPoints(t, ps, "h.sum", svcA, map[int64]float64{1000: c.sum})
				n := 0
				eachHistogram(r.results.AllMetrics(), "h.histogram", func(_ string, dp pmetric.HistogramDataPoint) {
					n++
					got := hist{dp.Count(), dp.Sum(), dp.HasSum(), dp.BucketCounts().AsRaw()}
					if got.count != c.hist.count || got.hasSum != c.hist.hasSum || got.sum != c.hist.sum || !slices.Equal(got.buckets, c.hist.buckets) {
						t.Errorf("%s: histogram %+v, want %+v", c.name, got, c.hist)
					}
				})
				if n != 1 {
					t.Errorf("%s: %d histogram points, want 1", c.name, n)
				}
				if got := incompatible(t, r, "h", "bucket_counts"); got != c.counts {
					t.Errorf("%s: incompatible_histograms{reason=bucket_counts} = %d, want %d", c.name, got, c.counts)
				}
				if got := incompatible(t, r, "h", "bounds"); got != c.bnd {
					t.Errorf("%s: incompatible_histograms{reason=bounds} = %d, want %d", c.name, got, c.bnd)
				}
				if got := pointsCounter(t, r.tel, "h", "aggregated"); got != int64(len(c.pts)) {
					t.Errorf("%s: metric_points aggregated = %d, want %d", c.name, got, len(c.pts))
				}
			}
		})
	}
}

// Exponential histograms (scale 0: bucket i holds (2^i, 2^(i+1)]), delta, service a:
//
//	p1 1001  offset 0, counts [2]: 2 values in (1, 2], sum 3               good
//	p2 1002  offset -2^31, counts [1], sum 1                              indices: it hung the collector
//	p3 1003  negative offset -2^31, counts [1], sum -1                    indices: likewise
//	p4 1004  offset 10^7, counts [1], sum 5: with p1, one series           indices: likewise, merged with p1
//	p5 1005  scale 21, offset 0, counts [1], sum 1                        scale
//
// count 2+1+1+1+1 = 6, sum 3+1-1+5+1 = 9; the histogram and p50 hold p1 alone: count 2, offset 0,
// counts [2], p50 = 2·1·2/(1+2) = 4/3, no sum. p1 alone: count 2, sum 3, p50 4/3, the histogram's
// sum 3.
//
// Service b, at scale 20, the furthest apart two points can be in a series and both hold floats near
// 1 and 745: offsets 0 and 10^7, sums 1 and 745. Nothing is wrong with them: count 2, sum 746, the
// histogram count 2, merged at a coarser scale.
//
// Service c, cumulative, started at 1000 (its first point counts whole):
//
//	1001  offset 0, counts [2], count 2, sum 3                      whole: 2, 3, into the histogram
//	1002  offset 0, counts [2], negative offset 10^7, counts [1]:   indices; its increase 1, sum -5
//	      count 3, sum -2
//	1003  offset 0, counts [4], count 4, sum 6                      no_previous_buckets; increase 1, sum 8
//
// count 4, sum 6, the histogram count 2.
func TestExponentialPointsNoHistogramHoldsCountButAreNotMerged(t *testing.T) {
	e := func(service, pod string, kind inKind, start, ts int64, h inHist) inPoint {
		return inPoint{service: service, pod: pod, metric: "r", kind: kind, start: start, t: ts, hist: &h}
	}
	good := e("a", "p1", inExponential, 0, 1001, inHist{count: 2, sum: 3, buckets: []uint64{2}})
	bad := []inPoint{
		e("a", "p2", inExponential, 0, 1002, inHist{count: 1, sum: 1, offset: math.MinInt32, buckets: []uint64{1}}),
		e("a", "p3", inExponential, 0, 1003, inHist{count: 1, sum: -1, negOffset: math.MinInt32, negBuckets: []uint64{1}}),
		e("a", "p4", inExponential, 0, 1004, inHist{count: 1, sum: 5, offset: 10_000_000, buckets: []uint64{1}}),
		e("a", "p5", inExponential, 0, 1005, inHist{count: 1, sum: 1, scale: 21, buckets: []uint64{1}}),
		e("b", "p6", inExponential, 0, 1001, inHist{count: 1, sum: 1, scale: 20, buckets: []uint64{1}}),
		e("b", "p7", inExponential, 0, 1002, inHist{count: 1, sum: 745, scale: 20, offset: 10_000_000, buckets: []uint64{1}}),
		e("c", "p8", inCumulativeExponential, 1000, 1001, inHist{count: 2, sum: 3, buckets: []uint64{2}}),
		e("c", "p8", inCumulativeExponential, 1000, 1002, inHist{count: 3, sum: -2, buckets: []uint64{2}, negOffset: 10_000_000, negBuckets: []uint64{1}}),
		e("c", "p8", inCumulativeExponential, 1000, 1003, inHist{count: 4, sum: 6, buckets: []uint64{4}}),
	}
	cfg := func() *Config {
		return metricsConfig(AggregationConfig{Name: "e", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"r"}},
			GroupBy: keys("service.name"), Outputs: []string{"count", "sum", "p50", "histogram"}})
	}
	svc := func(x string) string { return "service.name=" + x + "(Str)" }
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			for _, c := range []struct {
				name       string
				pts        []inPoint
				count, sum float64
				histSum    float64
				hasSum     bool
				indices    int64
				scale      int64
				noPrevious int64
			}{
				{"good alone", []inPoint{good}, 2, 3, 3, true, 0, 0, 0},
				{"with the malformed", append([]inPoint{good}, bad...), 6, 9, 0, false, 4, 1, 1},
			} {
				r := badRun(t, form, cfg(), c.pts...)
				ps := r.points()
				wantPoints(t, ps, "e.count", svcA, map[int64]float64{1000: c.count})
				wantPoints(t, ps, "e.sum", svcA, map[int64]float64{1000: c.sum})
				wantPoints(t, ps, "e.p50", svcA, map[int64]float64{1000: 4.0 / 3})
				want := map[string]uint64{svcA: 2}
				if len(c.pts) > 1 {
					wantPoints(t, ps, "e.count", svc("b"), map[int64]float64{1000: 2})
					wantPoints(t, ps, "e.sum", svc("b"), map[int64]float64{1000: 746})
					wantPoints(t, ps, "e.count", svc("c"), map[int64]float64{1000: 4})
					wantPoints(t, ps, "e.sum", svc("c"), map[int64]float64{1000: 6})
					want[svc("b")], want[svc("c")] = 2, 2
				}
				n := 0
				eachExponential(r.results.AllMetrics(), "e.histogram", func(attrs string, dp pmetric.ExponentialHistogramDataPoint) {
					n++
					if dp.Count() != want[attrs] {
						t.Errorf("%s: histogram {%s} count %d, want %d", c.name, attrs, dp.Count(), want[attrs])
					}
					if attrs != svcA {
						return
					}
					if dp.Scale() != 0 || dp.Positive().Offset() != 0 || !slices.Equal(dp.Positive().BucketCounts().AsRaw(), []uint64{2}) ||
						dp.Negative().BucketCounts().Len() != 0 || dp.HasSum() != c.hasSum || dp.Sum() != c.histSum {
						t.Errorf("%s: histogram scale %d offset %d counts %v, negative %v, sum %v (%v); want scale 0, offset 0, [2], none, %v (%v)",
							c.name, dp.Scale(), dp.Positive().Offset(), dp.Positive().BucketCounts().AsRaw(), dp.Negative().BucketCounts().AsRaw(),
							dp.Sum(), dp.HasSum(), c.histSum, c.hasSum)
					}
				})
				if n != len(want) {
					t.Errorf("%s: %d histogram points, want %d", c.name, n, len(want))
				}
				for reason, w := range map[string]int64{"indices": c.indices, "scale": c.scale, "no_previous_buckets": c.noPrevious} {
					if got := incompatible(t, r, "e", reason); got != w {
						t.Errorf("%s: incompatible_histograms{reason=%s} = %d, want %d", c.name, reason, got, w)
					}
				}
			}
		})
	}
}

// A gauge point whose value is not set, beside a 5: counted, and left out of the values. It was taken
// as 0 (avg 2.5, min 0). Alone, the 5: count 1, sum, avg, min and max 5.
func TestNumberPointWithoutAValueHasNone(t *testing.T) {
	cfg := func() *Config {
		return metricsConfig(AggregationConfig{Name: "g", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"queue.depth"}},
			Outputs: []string{"count", "sum", "avg", "min", "max"}})
	}
	unset := gauge("a", "p2", 1002, 0)
	unset.unset = true
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			for _, c := range []struct {
				pts     []inPoint
				count   float64
				missing int64
			}{{[]inPoint{gauge("a", "p1", 1001, 5)}, 1, 0}, {[]inPoint{gauge("a", "p1", 1001, 5), unset}, 2, 1}} {
				r := badRun(t, form, cfg(), c.pts...)
				ps := r.points()
				wantPoints(t, ps, "g.count", "", map[int64]float64{1000: c.count})
				for _, m := range []string{"g.sum", "g.avg", "g.min", "g.max"} {
					wantPoints(t, ps, m, "", map[int64]float64{1000: 5})
				}
				wantCounter(t, r.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "missing"}, c.missing)
			}
		})
	}
}

// A monotonic sum's point below zero is no increase: counted, left out of sum, so that the monotonic
// output stays monotonic.
//
//	delta      p1 1001: 5   p2 1002: -3                              count 2, sum 5
//	cumulative p3, started at 1000: 1001: 10 (whole)  1002: -4 (none; the base stays 10)  1003: 15 (+5)
//	                                                                   count 3, sum 15
//
// Without the negative points: count 1, sum 5; count 2, sum 15.
func TestNegativeIncreaseIsNone(t *testing.T) {
	cfg := func() *Config {
		return metricsConfig(
			AggregationConfig{Name: "d", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"requests"}}, Outputs: []string{"count", "sum"}},
			AggregationConfig{Name: "c", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"jobs"}}, Outputs: []string{"count", "sum"}})
	}
	delta := func(pod string, ts int64, v float64) inPoint {
		return inPoint{service: "a", pod: pod, metric: "requests", kind: inDeltaSum, t: ts, v: v}
	}
	cum := func(ts int64, v float64) inPoint {
		return inPoint{service: "a", pod: "p3", metric: "jobs", kind: inCounter, start: 1000, t: ts, v: v}
	}
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			for _, c := range []struct {
				pts              []inPoint
				dCount, cCount   float64
				negative, resets int64
			}{
				{[]inPoint{delta("p1", 1001, 5), cum(1001, 10), cum(1003, 15)}, 1, 2, 0, 0},
				{[]inPoint{delta("p1", 1001, 5), delta("p2", 1002, -3), cum(1001, 10), cum(1002, -4), cum(1003, 15)}, 2, 3, 2, 0},
			} {
				r := badRun(t, form, cfg(), c.pts...)
				ps := r.points()
				wantPoints(t, ps, "d.count", "", map[int64]float64{1000: c.dCount})
				wantPoints(t, ps, "d.sum", "", map[int64]float64{1000: 5})
				wantPoints(t, ps, "c.count", "", map[int64]float64{1000: c.cCount})
				wantPoints(t, ps, "c.sum", "", map[int64]float64{1000: 15})
				wantCounter(t, r.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "negative"}, c.negative)
				if got := counterIncluding(t, r.tel, "otelcol_window_aggregator_input_resets", nil); got != c.resets {
					t.Errorf("input_resets = %d, want %d", got, c.resets)
				}
				eachMetric(r.results.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
					if (m.Name() == "d.sum" || m.Name() == "c.sum") && !m.Sum().IsMonotonic() {
						t.Errorf("%s is not monotonic", m.Name())
					}
				})
			}
		})
	}
}

// Histogram counts past what the outputs hold, bounds (1]:
//
//	p1 1001  count 2^63+5, sum 1, counts [2^63+5 0]
//	p2 1002  likewise
//	p3 1003  count 3, sum 3, counts [1 2]
//
// p1 alone: count 2^63+5 does not fit the int64 count: 2^63-1, counted once; it wrapped to -9.2e18.
// The histogram's uint64 count holds it. All three: count 2^63-1; the histogram's first bucket
// 2·(2^63+5) past 2^64-1: 2^64-1, its count 2^64-1, the second bucket 2; two points saturated. p3
// alone: count 3, counts [1 2].
func TestCountsThatDoNotFitSaturate(t *testing.T) {
	const big = uint64(1)<<63 + 5
	h := func(pod string, ts int64, count uint64, counts ...uint64) inPoint {
		return inPoint{service: "a", pod: pod, metric: "d", kind: inHistogram, t: ts,
			hist: &inHist{count: count, sum: float64(min(count, 3)), bounds: []float64{1}, buckets: counts}}
	}
	p1, p2, p3 := h("p1", 1001, big, big, 0), h("p2", 1002, big, big, 0), h("p3", 1003, 3, 1, 2)
	cfg := func() *Config {
		return metricsConfig(AggregationConfig{Name: "w", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"d"}},
			Outputs: []string{"count", "histogram"}, Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{1}}}})
	}
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			for _, c := range []struct {
				name      string
				pts       []inPoint
				count     int64
				histCount uint64
				buckets   []uint64
				saturated int64
			}{
				{"p3 alone", []inPoint{p3}, 3, 3, []uint64{1, 2}, 0},
				{"p1 alone", []inPoint{p1}, math.MaxInt64, big, []uint64{big, 0}, 1},
				{"all three", []inPoint{p1, p2, p3}, math.MaxInt64, math.MaxUint64, []uint64{math.MaxUint64, 2}, 2},
			} {
				r := badRun(t, form, cfg(), c.pts...)
				seen := 0
				eachMetric(r.results.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
					switch m.Name() {
					case "w.count":
						seen++
						if got := m.Sum().DataPoints().At(0).IntValue(); got != c.count {
							t.Errorf("%s: count %d, want %d", c.name, got, c.count)
						}
					case "w.histogram":
						seen++
						dp := m.Histogram().DataPoints().At(0)
						if dp.Count() != c.histCount || !slices.Equal(dp.BucketCounts().AsRaw(), c.buckets) {
							t.Errorf("%s: histogram count %d, counts %v; want %d, %v", c.name, dp.Count(), dp.BucketCounts().AsRaw(), c.histCount, c.buckets)
						}
					}
				})
				if seen != 2 {
					t.Errorf("%s: %d of the 2 outputs emitted", c.name, seen)
				}
				wantCounter(t, r.tel, "otelcol_window_aggregator_saturated_points", map[string]string{"aggregation": "w"}, c.saturated)
			}
		})
	}
}
