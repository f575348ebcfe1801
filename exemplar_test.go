package windowaggregator

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Exemplars through the factories, on spans whose ids, durations and end times are chosen by hand.

// exemplarConfig is a 10 s tumbling window, allowed_lateness 30 s, group_by service.name, with count,
// max and a histogram (explicit with 5 ms and 50 ms buckets, or exponential) of span durations in ms,
// and k exemplars a point (0: disabled).
func exemplarConfig(temporality Temporality, late LateFirings, explicit bool, k int) *Config {
	cfg := baseConfig()
	cfg.AllowedLateness = 30 * time.Second
	cfg.Temporality, cfg.LateFirings = temporality, late
	a := AggregationConfig{Name: "lat", Signal: "spans", GroupBy: keys("service.name"),
		Outputs: []string{"count", "max", "histogram"}, Exemplars: ExemplarsConfig{Enabled: k > 0, MaxPerDataPoint: k}}
	if explicit {
		a.Histogram = &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{"5ms", "50ms"}}}
	}
	cfg.Aggregations = []AggregationConfig{a}
	return cfg
}

// seenExemplar is an exemplar as a backend gets it: the spanSpec id its trace and span ids encode,
// its value and its time in ns.
type seenExemplar struct {
	id    uint64
	value float64
	time  int64
}

// exemplarsOf returns the exemplars of every data point of metric for service, by the point's
// timestamp in seconds, one list per data point; ids that do not decode to a spanSpec id fail t.
func exemplarsOf(t *testing.T, all []pmetric.Metrics, metric, service string) map[int64][][]seenExemplar {
	t.Helper()
	out := map[int64][][]seenExemplar{}
	add := func(attrs string, ts int64, exs pmetric.ExemplarSlice) {
		if attrs != "service.name="+service+"(Str)" {
			return
		}
		var got []seenExemplar
		for i := 0; i < exs.Len(); i++ {
			ex := exs.At(i)
			tr, sp := ex.TraceID(), ex.SpanID()
			id := binary.BigEndian.Uint64(tr[8:])
			if wantTr, wantSp := spanIDs(id); tr != wantTr || sp != wantSp {
				t.Fatalf("%s at %d: exemplar ids %x %x are not of one span", metric, ts, tr, sp)
			}
			got = append(got, seenExemplar{id, ex.DoubleValue(), int64(ex.Timestamp())})
		}
		out[ts/s] = append(out[ts/s], got)
	}
	for _, md := range all {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			svc, _ := rm.Resource().Attributes().Get("service.name")
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					if m.Name() != metric {
						continue
					}
					attrs := "service.name=" + svc.AsString() + "(Str)"
					switch m.Type() {
					case pmetric.MetricTypeGauge:
						for d := 0; d < m.Gauge().DataPoints().Len(); d++ {
							dp := m.Gauge().DataPoints().At(d)
							add(attrs, int64(dp.Timestamp()), dp.Exemplars())
						}
					case pmetric.MetricTypeHistogram:
						for d := 0; d < m.Histogram().DataPoints().Len(); d++ {
							dp := m.Histogram().DataPoints().At(d)
							add(attrs, int64(dp.Timestamp()), dp.Exemplars())
						}
					case pmetric.MetricTypeExponentialHistogram:
						for d := 0; d < m.ExponentialHistogram().DataPoints().Len(); d++ {
							dp := m.ExponentialHistogram().DataPoints().At(d)
							add(attrs, int64(dp.Timestamp()), dp.Exemplars())
						}
					case pmetric.MetricTypeSum:
						for d := 0; d < m.Sum().DataPoints().Len(); d++ {
							dp := m.Sum().DataPoints().At(d)
							add(attrs, int64(dp.Timestamp()), dp.Exemplars())
						}
					}
				}
			}
		}
	}
	return out
}

// exemplarTraffic is the spans of the tests below, in four batches:
//   - a: ids 1 to 7 in [0,10), durations 3, 40, 12, 70, 8, 25, 1 ms (the slowest is id 4), and a span
//     without ids (0.5 ms); b: ids 8 (9 ms) and 9 (2 ms);
//   - a: id 10 at 12 s, 30 ms, which moves W to 12 and fires [0,10);
//   - a: id 11 at 5 s, 90 ms, late for [0,10) and within allowed_lateness;
//   - a: id 12 at 21 s, 4 ms, which fires [10,20). [20,30) fires at shutdown.
var exemplarTraffic = [][]spanSpec{
	{{service: "a", end: 1, ms: 3, id: 1}, {service: "a", end: 2, ms: 40, id: 2}, {service: "a", end: 3, ms: 12, id: 3},
		{service: "a", end: 4, ms: 70, id: 4}, {service: "a", end: 5, ms: 8, id: 5}, {service: "a", end: 6, ms: 25, id: 6},
		{service: "a", end: 7, ms: 1, id: 7}, {service: "a", end: 7.5, ms: 0.5},
		{service: "b", end: 2, ms: 9, id: 8}, {service: "b", end: 3, ms: 2, id: 9}},
	{{service: "a", end: 12, ms: 30, id: 10}},
	{{service: "a", end: 5, ms: 90, id: 11}},
	{{service: "a", end: 21, ms: 4, id: 12}},
}

// spanOfTraffic returns the spanSpec of id in exemplarTraffic.
func spanOfTraffic(id uint64) spanSpec {
	for _, batch := range exemplarTraffic {
		for _, sp := range batch {
			if sp.id == id {
				return sp
			}
		}
	}
	return spanSpec{}
}

// runExemplarTraffic sends exemplarTraffic, one batch at a time, and shuts down.
func runExemplarTraffic(t *testing.T, cfg *Config) []pmetric.Metrics {
	t.Helper()
	useFakeClock(t)
	h := newConnectorHarness(t, cfg, true)
	for _, batch := range exemplarTraffic {
		h.sendTraces(traces(batch...))
	}
	h.shutdown()
	return h.metrics.AllMetrics()
}

// wantExemplars checks one data point's exemplars: n of them, spans of ids among, the ones of must
// included, each with its span's duration in ms and end time, in order of time.
func wantExemplars(t *testing.T, what string, got []seenExemplar, n int, among, must []uint64) {
	t.Helper()
	var ids []uint64
	for i, ex := range got {
		sp := spanOfTraffic(ex.id)
		if !slices.Contains(among, ex.id) || slices.Contains(ids, ex.id) {
			t.Errorf("%s: exemplar of span %d, want distinct spans of %v", what, ex.id, among)
		}
		if ex.value != sp.ms || ex.time != int64(sp.end*float64(s)) {
			t.Errorf("%s: exemplar of span %d is %v ms at %d ns, the span took %v ms and ended at %v s", what, ex.id, ex.value, ex.time, sp.ms, sp.end)
		}
		if i > 0 && ex.time < got[i-1].time {
			t.Errorf("%s: exemplars not in order of time: %v", what, got)
		}
		ids = append(ids, ex.id)
	}
	if len(got) != n {
		t.Errorf("%s: %d exemplars %v, want %d", what, len(got), ids, n)
	}
	for _, id := range must {
		if !slices.Contains(ids, id) {
			t.Errorf("%s: exemplars %v lack span %d", what, ids, id)
		}
	}
}

// one returns the only data point at ts, failing t if there is not exactly one.
func one(t *testing.T, byEnd map[int64][][]seenExemplar, what string, ts int64) []seenExemplar {
	t.Helper()
	if len(byEnd[ts]) != 1 {
		t.Fatalf("%s: %d data points at %d s, want 1", what, len(byEnd[ts]), ts)
	}
	return byEnd[ts][0]
}

// Delta points, late records folded: each histogram point carries spans counted in it, the slowest
// among them, at most max_per_data_point; the late span goes with the point that counts it; the max
// gauge carries the window's slowest span.
func TestExemplarsAreSpansOfTheirPoint(t *testing.T) {
	for _, explicit := range []bool{true, false} {
		t.Run(fmt.Sprintf("explicit=%v", explicit), func(t *testing.T) {
			all := runExemplarTraffic(t, exemplarConfig(temporalityDelta, lateFold, explicit, 3))
			hist, maxes := exemplarsOf(t, all, "lat.histogram", "a"), exemplarsOf(t, all, "lat.max", "a")
			wantExemplars(t, "a's histogram at 10", one(t, hist, "a's histogram", 10), 3, []uint64{1, 2, 3, 4, 5, 6, 7}, []uint64{4})
			wantExemplars(t, "a's max of [0,10)", one(t, maxes, "a's max", 10), 1, []uint64{4}, []uint64{4})
			// [10,20): id 10 and the late id 11 folded; the max gauge is of the window's own spans.
			wantExemplars(t, "a's histogram at 20", one(t, hist, "a's histogram", 20), 2, []uint64{10, 11}, []uint64{10, 11})
			wantExemplars(t, "a's max of [10,20)", one(t, maxes, "a's max", 20), 1, []uint64{10}, []uint64{10})
			wantExemplars(t, "a's histogram at 30", one(t, hist, "a's histogram", 30), 1, []uint64{12}, []uint64{12})
			b := exemplarsOf(t, all, "lat.histogram", "b")
			wantExemplars(t, "b's histogram at 10", one(t, b, "b's histogram", 10), 2, []uint64{8, 9}, []uint64{8, 9})
			bMax := exemplarsOf(t, all, "lat.max", "b")
			wantExemplars(t, "b's max of [0,10)", one(t, bMax, "b's max", 10), 1, []uint64{8}, []uint64{8})
			for ts, dps := range exemplarsOf(t, all, "lat.count", "a") {
				if len(dps) != 1 || len(dps[0]) != 0 {
					t.Errorf("count points at %d carry exemplars: %v", ts, dps)
				}
			}
		})
	}
}

// Without exemplars enabled no data point carries one.
func TestNoExemplarsWhenDisabled(t *testing.T) {
	all := runExemplarTraffic(t, exemplarConfig(temporalityDelta, lateFold, true, 0))
	for _, metric := range []string{"lat.histogram", "lat.max", "lat.count"} {
		for _, svc := range []string{"a", "b"} {
			points := exemplarsOf(t, all, metric, svc)
			if len(points) == 0 {
				t.Errorf("no %s points of %s: nothing to find exemplars on", metric, svc)
			}
			for ts, dps := range points {
				for _, exs := range dps {
					if len(exs) > 0 {
						t.Errorf("%s of %s at %d carries exemplars %v", metric, svc, ts, exs)
					}
				}
			}
		}
	}
}

// Cumulative points carry the spans added since the series' previous point, not the older ones.
func TestCumulativeExemplarsAreSincePreviousPoint(t *testing.T) {
	all := runExemplarTraffic(t, exemplarConfig(temporalityCumulative, lateFold, true, 3))
	hist := exemplarsOf(t, all, "lat.histogram", "a")
	wantExemplars(t, "a at 10", one(t, hist, "a", 10), 3, []uint64{1, 2, 3, 4, 5, 6, 7}, []uint64{4})
	wantExemplars(t, "a at 20", one(t, hist, "a", 20), 2, []uint64{10, 11}, []uint64{10, 11})
	wantExemplars(t, "a at 30", one(t, hist, "a", 30), 1, []uint64{12}, []uint64{12})
}

// With late firings that revise, the late firing's histogram point carries the late span, and its max
// gauge, the whole window's corrected, the late span too, which is the window's slowest now.
func TestRevisedFiringCarriesTheLateSpan(t *testing.T) {
	all := runExemplarTraffic(t, exemplarConfig(temporalityDelta, lateRevise, true, 3))
	hist, maxes := exemplarsOf(t, all, "lat.histogram", "a"), exemplarsOf(t, all, "lat.max", "a")
	if len(hist[10]) != 2 || len(maxes[10]) != 2 {
		t.Fatalf("a at 10: %d histogram points and %d max gauges, want a first and a late firing each", len(hist[10]), len(maxes[10]))
	}
	wantExemplars(t, "a's first histogram at 10", hist[10][0], 3, []uint64{1, 2, 3, 4, 5, 6, 7}, []uint64{4})
	wantExemplars(t, "a's late histogram at 10", hist[10][1], 1, []uint64{11}, []uint64{11})
	wantExemplars(t, "a's first max of [0,10)", maxes[10][0], 1, []uint64{4}, []uint64{4})
	wantExemplars(t, "a's revised max of [0,10)", maxes[10][1], 1, []uint64{11}, []uint64{11})
	wantExemplars(t, "a at 20", one(t, hist, "a", 20), 1, []uint64{10}, []uint64{10})
}

// Exemplars of windows open at a shutdown with storage come back with the restored state.
func TestExemplarsSurviveARestart(t *testing.T) {
	useFakeClock(t)
	cfg := exemplarConfig(temporalityDelta, lateFold, true, 3)
	cfg.Storage = &storageID
	st := &memStorage{data: map[string][]byte{}}
	// Before: a's ids 1 to 5 in [0,10), of which id 4 is the slowest; W stays below 10.
	before := runAsCollector(t, cfg, st, "c1", exemplarTraffic[0][:5]...)
	if n := len(exemplarsOf(t, before.AllMetrics(), "lat.histogram", "a")); n != 0 {
		t.Fatalf("%d points before the restart, want none: the window was open", n)
	}
	after := runAsCollector(t, cfg, st, "c1", spanSpec{service: "a", end: 12, ms: 30, id: 10})
	all := after.AllMetrics()
	wantExemplars(t, "a at 10", one(t, exemplarsOf(t, all, "lat.histogram", "a"), "a", 10), 3, []uint64{1, 2, 3, 4, 5}, []uint64{4})
	wantExemplars(t, "a's max of [0,10)", one(t, exemplarsOf(t, all, "lat.max", "a"), "a's max", 10), 1, []uint64{4}, []uint64{4})
}

// The exemplars beside the slowest are a uniform sample of the point's other spans: over 2,000 series
// of 20 spans each, every arrival position is sampled about equally often. The spans' ids come from a
// fixed seed, so the statistic is the same at every run; the bound is chi-square's 99.9th percentile
// for 19 degrees of freedom (20 positions whose counts add up to 2,000 × 4; the slowest span, always
// kept, is left out).
func TestExemplarSampleIsUniform(t *testing.T) {
	const series, perSeries, k = 2000, 20, 5
	useFakeClock(t)
	cfg := exemplarConfig(temporalityDelta, lateFold, true, k)
	cfg.Aggregations[0].GroupBy = keys("service.name", "n")
	cfg.MaxSeries = series
	rng := rand.New(rand.NewPCG(7, 11))
	var specs []spanSpec
	position := map[uint64]int{} // by span id: its arrival position in its series
	for n := range series {
		slowest := rng.IntN(perSeries)
		for i := range perSeries {
			id := rng.Uint64() | 1
			ms := 1 + float64(i)/100 // distinct, and far below the slowest
			if i == slowest {
				ms = 100
			}
			position[id] = i
			specs = append(specs, spanSpec{service: "a", end: 1 + float64(i)/100, ms: ms, id: id, attrs: map[string]any{"n": n}})
		}
	}
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(specs...))
	h.shutdown()

	counts := make([]float64, perSeries) // times each position was in the sample, the slowest left out
	points := 0
	for _, md := range h.metrics.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				for m := 0; m < sms.At(j).Metrics().Len(); m++ {
					metric := sms.At(j).Metrics().At(m)
					if metric.Name() != "lat.histogram" {
						continue
					}
					for d := 0; d < metric.Histogram().DataPoints().Len(); d++ {
						exs := metric.Histogram().DataPoints().At(d).Exemplars()
						points++
						if exs.Len() != k {
							t.Fatalf("a point with %d exemplars, want %d", exs.Len(), k)
						}
						slowest := 0
						for e := 0; e < exs.Len(); e++ {
							tr := exs.At(e).TraceID()
							if exs.At(e).DoubleValue() == 100 {
								slowest++
								continue
							}
							counts[position[binary.BigEndian.Uint64(tr[8:])]]++
						}
						if slowest != 1 {
							t.Fatalf("a point whose exemplars hold the slowest span %d times, want once", slowest)
						}
					}
				}
			}
		}
	}
	if points != series {
		t.Fatalf("%d histogram points, want %d", points, series)
	}
	// Each series' slowest is at a random position; the other k-1 = 4 are drawn from its 19 others, so
	// position i is sampled with probability 4/19 when it is not the slowest, 19/20 of the time.
	expected := float64(series) * (perSeries - 1) / perSeries * (k - 1) / (perSeries - 1)
	chi2 := 0.0
	for _, c := range counts {
		chi2 += (c - expected) * (c - expected) / expected
	}
	t.Logf("chi-square %.1f over %d positions (expected %.0f each): %v", chi2, perSeries, expected, counts)
	if bound := 43.8; chi2 > bound || math.IsNaN(chi2) {
		t.Fatalf("chi-square %.1f > %.1f: the sample is not uniform over arrival positions %v", chi2, bound, counts)
	}
}
