package windowaggregator

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
)

// Every row of the table of outputs, through the connector, on one window worked out by hand: four
// spans of 10, 20, 30 and 40 ms in [0, 10), of four traces, three with a user.id (u1, u2, u1). A new
// row needs its case here.
func TestEveryOutputOfTheTable(t *testing.T) {
	useFakeClock(t)
	type want struct {
		metric string
		typ    pmetric.MetricType
		unit   string
		value  float64 // int or double value; a histogram's count
		tol    float64 // relative
	}
	cases := map[string]want{
		"count":     {"o.count", pmetric.MetricTypeSum, "{span}", 4, 0},
		"sum":       {"o.sum", pmetric.MetricTypeSum, "ms", 100, 0},
		"avg":       {"o.avg", pmetric.MetricTypeGauge, "ms", 25, 0},
		"min":       {"o.min", pmetric.MetricTypeGauge, "ms", 10, 0},
		"max":       {"o.max", pmetric.MetricTypeGauge, "ms", 40, 0},
		"p50":       {"o.p50", pmetric.MetricTypeGauge, "ms", 20, 0.01}, // pNN; nearest rank: the 2nd of 4
		"histogram": {"o.histogram", pmetric.MetricTypeExponentialHistogram, "ms", 4, 0},
		// mean 25: (15² + 5² + 5² + 15²) / 4 = 125
		"stddev":            {"o.stddev", pmetric.MetricTypeGauge, "ms", math.Sqrt(125), 1e-12},
		"stdvar":            {"o.stdvar", pmetric.MetricTypeGauge, "ms2", 125, 1e-12},
		"rate":              {"o.rate", pmetric.MetricTypeGauge, "{span}/s", 0.4, 0}, // 4 spans in 10 s
		"distinct:trace_id": {"o.distinct.trace_id", pmetric.MetricTypeGauge, "{value}", 4, 0},
		"distinct:user.id":  {"o.distinct.user.id", pmetric.MetricTypeGauge, "{value}", 2, 0}, // not a row: a second key
	}
	configured := append(delivery.Rows(), "distinct:user.id")
	for _, row := range configured {
		if _, ok := cases[row]; !ok {
			t.Errorf("output %q has no case in this test", row)
		}
	}
	for _, temporality := range []Temporality{temporalityCumulative, temporalityDelta} {
		t.Run(string(temporality), func(t *testing.T) {
			cfg := baseConfig()
			cfg.Temporality, cfg.LateFirings = temporality, lateFold
			wantTemporality := pmetric.AggregationTemporalityDelta
			if temporality == temporalityCumulative {
				wantTemporality = pmetric.AggregationTemporalityCumulative
			}
			cfg.Aggregations = []AggregationConfig{{Name: "o", Signal: "spans", Outputs: configured},
				{Name: "e", Signal: "spans", Outputs: []string{"histogram"},
					Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{"15ms", "35ms"}}}}}
			h := newConnectorHarness(t, cfg, false)
			user := func(u string) map[string]any { return map[string]any{"user.id": u} }
			h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 1, ms: 10, id: 1, attrs: user("u1")},
				spanSpec{service: "a", name: "x", end: 2, ms: 20, id: 2, attrs: user("u2")},
				spanSpec{service: "a", name: "x", end: 3, ms: 30, id: 3, attrs: user("u1")}, spanSpec{service: "a", name: "x", end: 4, ms: 40, id: 4}))
			h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 11, ms: 1})) // W = 11: [0,10) fires
			got := map[string]pmetric.Metric{}
			for _, md := range h.metrics.AllMetrics() {
				ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
				for i := 0; i < ms.Len(); i++ {
					got[ms.At(i).Name()] = ms.At(i)
				}
			}
			if d := got["o.p50"].Description(); d != "Percentile p50 of the values in the window, within 1% relative error." {
				t.Errorf("o.p50's description is %q", d)
			}
			for row, w := range cases {
				m, ok := got[w.metric]
				switch {
				case !ok:
					t.Errorf("%s: no metric %s", row, w.metric)
					continue
				case m.Type() != w.typ || m.Unit() != w.unit || m.Description() == "" || strings.Contains(m.Description(), "%!"):
					t.Errorf("%s: %s is a %v in %q (%q), want a %v in %q with a description", row, w.metric, m.Type(), m.Unit(), m.Description(), w.typ, w.unit)
					continue
				}
				var v float64
				switch m.Type() {
				case pmetric.MetricTypeSum:
					// count, and sum of durations (never negative), are monotonic.
					if !m.Sum().IsMonotonic() || m.Sum().AggregationTemporality() != wantTemporality {
						t.Errorf("%s: a monotonic sum of temporality %v, got %v", row, wantTemporality, m.Sum().AggregationTemporality())
					}
					dp := m.Sum().DataPoints().At(0)
					v = dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
				case pmetric.MetricTypeGauge:
					dp := m.Gauge().DataPoints().At(0)
					v = dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
				case pmetric.MetricTypeExponentialHistogram:
					if m.ExponentialHistogram().AggregationTemporality() != wantTemporality {
						t.Errorf("%s: temporality %v", row, m.ExponentialHistogram().AggregationTemporality())
					}
					v = float64(m.ExponentialHistogram().DataPoints().At(0).Count())
				}
				if math.Abs(v-w.value) > w.tol*w.value {
					t.Errorf("%s: %s = %v, want %v", row, w.metric, v, w.value)
				}
			}
			// The same row with explicit buckets: 10 | 20, 30 | 40 in (-inf, 15], (15, 35], (35, +inf).
			e, ok := got["e.histogram"]
			if !ok || e.Type() != pmetric.MetricTypeHistogram || e.Unit() != "ms" || e.Histogram().AggregationTemporality() != wantTemporality {
				t.Fatalf("e.histogram: %v", e.Type())
			}
			dp := e.Histogram().DataPoints().At(0)
			if !slices.Equal(dp.ExplicitBounds().AsRaw(), []float64{15, 35}) || !slices.Equal(dp.BucketCounts().AsRaw(), []uint64{1, 2, 1}) ||
				dp.Count() != 4 || dp.Sum() != 100 || dp.StartTimestamp() != 0 || dp.Timestamp() != pcommon.Timestamp(10*time.Second) {
				t.Errorf("e.histogram point: bounds %v counts %v count %d sum %v [%v, %v]", dp.ExplicitBounds().AsRaw(),
					dp.BucketCounts().AsRaw(), dp.Count(), dp.Sum(), dp.StartTimestamp(), dp.Timestamp())
			}
		})
	}
}
