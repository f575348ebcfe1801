package windowaggregator

import (
	"context"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The outputs kept in accumulators (stddev, stdvar, distinct:<key>) and rate, through both forms'
// factories and both temporalities, on windows worked out by hand: 20 s windows sliding by 10 s,
// spans of 2, 4, 4, 4 ms in [100, 110) and 5, 5, 7, 9 ms in [110, 120), of users a, b, b, c and c,
// d, e and none.
//
//	window      values              mean  stdvar                      users        rate
//	[90, 110)   2 4 4 4             3.5   (2.25 + 3 × 0.25)/4 = 0.75  a b c (3)    4/20
//	[100, 120)  2 4 4 4 5 5 7 9     5     32/8 = 4 (stddev 2)         a-e (5)      8/20
//	[110, 130)  5 5 7 9             6.5   11/4 = 2.75                 c d e (3)    4/20
//
// The distinct count of [100, 120) is the union of its two slides' users (5), not their sum (6).
func TestAccumulatorOutputsThroughBothForms(t *testing.T) {
	want := map[string]map[int64]float64{
		"s.stdvar":            {90: 0.75, 100: 4, 110: 2.75},
		"s.stddev":            {90: math.Sqrt(0.75), 100: 2, 110: math.Sqrt(2.75)},
		"s.distinct.user.id":  {90: 3, 100: 5, 110: 3},
		"s.distinct.trace_id": {90: 4, 100: 8, 110: 4},
		"s.rate":              {90: 0.2, 100: 0.4, 110: 0.2},
	}
	users := []string{"a", "b", "b", "c", "c", "d", "e", ""}
	var specs []spanSpec
	for i, ms := range []float64{2, 4, 4, 4, 5, 5, 7, 9} {
		sp := spanSpec{service: "a", name: "x", end: 101 + float64(i/4)*10 + float64(i%4), ms: ms, id: uint64(i + 1)}
		if users[i] != "" {
			sp.attrs = map[string]any{"user.id": users[i]}
		}
		specs = append(specs, sp)
	}
	for _, form := range []string{"connector", "processor"} {
		for _, temporality := range []Temporality{temporalityCumulative, temporalityDelta} {
			t.Run(form+"/"+string(temporality), func(t *testing.T) {
				useFakeClock(t)
				cfg := baseConfig()
				cfg.Window.Size, cfg.Window.Slide = 20*time.Second, 10*time.Second
				cfg.Temporality, cfg.LateFirings = temporality, lateFold
				cfg.Aggregations = []AggregationConfig{{Name: "s", Signal: "spans",
					Outputs: []string{"count", "stddev", "stdvar", "rate", "distinct:user.id", "distinct:trace_id"}}}
				sink := new(consumertest.MetricsSink)
				send := sendTracesTo(t, form, cfg, sink)
				send(traces(specs...))
				send(traces(spanSpec{service: "a", name: "x", end: 131, ms: 1, id: 99})) // W = 131: the three windows fire
				ps := points(sink.AllMetrics())
				for metric, byStart := range want {
					got := map[int64]float64{}
					for _, p := range find(ps, metric, "") {
						if p.typ != pmetric.MetricTypeGauge || p.end-p.start != 20 {
							t.Errorf("%s: a %v over [%d, %d), want a gauge of its 20 s window", metric, p.typ, p.start, p.end)
						}
						got[p.start] = p.value
					}
					for start, v := range byStart {
						if g, ok := got[start]; !ok || math.Abs(g-v) > 1e-12*math.Max(1, v) {
							t.Errorf("%s of [%d, %d): %v (present %v), want %v", metric, start, start+20, g, ok, v)
						}
					}
				}
			})
		}
	}
}

// sendTracesTo returns a function that feeds a batch of spans to the component in form
// ("connector" or "processor"), created with cfg through its factory, with its results to sink,
// and settles it so that the results are in sink.
func sendTracesTo(t *testing.T, form string, cfg *Config, sink *consumertest.MetricsSink) func(ptrace.Traces) {
	if form == "connector" {
		h := newConnectorHarnessTo(t, cfg, sink)
		return h.sendTraces
	}
	h := newProcessorHarness(t, cfg, sink)
	return func(td ptrace.Traces) {
		must(t, h.traces.ConsumeTraces(context.Background(), td))
		settleAll(t)
	}
}

// Weights count as multiplicity in the spread, not in distinct values: a span of 2 ms of adjusted
// weight 3 (the attribute) and one of 6 ms are 2, 2, 2, 6: mean 3, stdvar (3 × 1 + 9)/4 = 3; of two
// users.
func TestSpreadWeighsDistinctDoesNot(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "w", Signal: "spans", Weight: "attribute:n",
		Outputs: []string{"count", "stdvar", "distinct:user.id", "rate"}}}
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 1, ms: 2, id: 1, attrs: map[string]any{"n": 3, "user.id": "u"}},
		spanSpec{service: "a", name: "x", end: 2, ms: 6, id: 2, attrs: map[string]any{"n": 1, "user.id": "v"}}))
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 11, ms: 1, id: 3}))
	ps := points(h.metrics.AllMetrics())
	wantPoint(t, ps, "w.count", "", 0, 10, 4)
	wantPoint(t, ps, "w.stdvar", "", 0, 10, 3)
	wantPoint(t, ps, "w.distinct.user.id", "", 0, 10, 2)
	wantPoint(t, ps, "w.rate", "", 0, 10, 0.4) // 4 records, weighted, in 10 s
}

// Values that share a large offset (10^6 ± 1, and a few halves, in an attribute) keep their spread:
// within 1e-6 of a two-pass computation over the same values.
func TestSpreadOfLargeOffsetThroughTheConnector(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "o", Signal: "spans", Value: ValueConfig{Source: "attribute:v"}, Outputs: []string{"stdvar"}}}
	h := newConnectorHarness(t, cfg, false)
	var specs []spanSpec
	var vs []float64
	for i := range 1000 {
		v := 1e6 + 1 - 2*float64(i%2)
		if i%7 == 0 {
			v += 0.5
		}
		specs = append(specs, spanSpec{service: "a", name: "x", end: 1 + float64(i)/200, ms: 1, id: uint64(i + 1), attrs: map[string]any{"v": v}})
		vs = append(vs, v)
	}
	h.sendTraces(traces(specs...))
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 11, ms: 1, id: 5000}))
	var mean, m2 float64
	for _, v := range vs {
		mean += v / float64(len(vs))
	}
	for _, v := range vs {
		m2 += (v - mean) * (v - mean)
	}
	want := m2 / float64(len(vs))
	got := find(points(h.metrics.AllMetrics()), "o.stdvar", "")
	if len(got) != 1 || math.Abs(got[0].value-want)/want > 1e-6 {
		t.Fatalf("stdvar %v, two-pass %v", got, want)
	}
}

// Metric points, in both forms: rate is the sum per second (a counter's increase per second), in
// the input's unit per second, and distinct counts a point attribute's values. Gauges as in
// TestGaugesFromPodsAggregateByService: a's 4, 10, 6 from pods p1, p2, p1 sum to 20 in
// [1000, 1010): 2/s of 2 pods; b's 1, 3 from p3: 0.4/s of 1 pod. A counter's increases as in
// TestCumulativeCounterGivesTrueIncreasesAcrossPods: a's 37 in [1000, 1010), 3.7/s.
func TestRateAndDistinctOfMetricPoints(t *testing.T) {
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			cfg := metricsConfig(AggregationConfig{Name: "depth", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"queue.depth"}},
				GroupBy: keys("service.name"), Outputs: []string{"rate", "distinct:k8s.pod.name"}},
				AggregationConfig{Name: "reqs", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"http.requests"}},
					GroupBy: keys("service.name"), Outputs: []string{"sum", "rate"}})
			r := startMetrics(t, form, cfg, nil)
			r.at(1010)
			r.send(inMetrics(gauge("a", "p1", 1001, 4), gauge("a", "p2", 1002, 10), gauge("b", "p3", 1003, 1),
				gauge("a", "p1", 1005, 6), gauge("b", "p3", 1007, 3),
				counter("a", "p1", 900, 1005, 100), counter("a", "p1", 900, 1008, 130), counter("a", "p2", 1002, 1006, 7)))
			r.at(1020)
			r.send(inMetrics(gauge("c", "p9", 1015, 0)))
			ps := r.points()
			wantPoints(t, ps, "depth.rate", svcA, map[int64]float64{1000: 2})
			wantPoints(t, ps, "depth.rate", svcB, map[int64]float64{1000: 0.4})
			wantPoints(t, ps, "depth.distinct.k8s.pod.name", svcA, map[int64]float64{1000: 2})
			wantPoints(t, ps, "depth.distinct.k8s.pod.name", svcB, map[int64]float64{1000: 1})
			wantPoints(t, ps, "reqs.rate", svcA, map[int64]float64{1000: 3.7})
			eachMetric(r.results.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
				want := map[string]string{"depth.rate": "{message}/s", "reqs.rate": "{request}/s", "depth.distinct.k8s.pod.name": "{value}", "reqs.sum": "{request}"}[m.Name()]
				if m.Unit() != want {
					t.Errorf("%s: unit %q, want %q", m.Name(), m.Unit(), want)
				}
			})
		})
	}
}
