package windowaggregator

// An independent check of the contract's "Metrics in (v3)" section (../shared/design/contract.md),
// with the expectations worked out by hand from the contract text alone. Every test uses
// baseConfig(): 10 s tumbling windows aligned to the epoch, temporality delta, late_firings revise,
// max_out_of_orderness 0 (so W = the greatest accepted event time, clamped to the fake wall clock,
// which starts at 1000 s: the component "starts" at 1000 s).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// ---- inputs ----

// mcBatch builds one pmetric.Metrics with one ResourceMetrics per pod (service.name and pod on the
// resource) and one scope each.
type mcBatch struct {
	md   pmetric.Metrics
	pods map[string]pmetric.MetricSlice
}

func newMCBatch() *mcBatch {
	return &mcBatch{md: pmetric.NewMetrics(), pods: map[string]pmetric.MetricSlice{}}
}

func (b *mcBatch) metrics(service, pod string) pmetric.MetricSlice {
	if ms, ok := b.pods[pod]; ok {
		return ms
	}
	rm := b.md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", service)
	rm.Resource().Attributes().PutStr("pod", pod)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("example.com/instrumentation")
	b.pods[pod] = sm.Metrics()
	return sm.Metrics()
}

func mcTS(sec int64) pcommon.Timestamp { return pcommon.Timestamp(sec * s) }

func mcSetNumber(dp pmetric.NumberDataPoint, v any) {
	switch v := v.(type) {
	case int:
		dp.SetIntValue(int64(v))
	case float64:
		dp.SetDoubleValue(v)
	default:
		panic(fmt.Sprintf("value %T", v))
	}
}

// gauge adds a Gauge metric with one point at ts.
func (b *mcBatch) gauge(service, pod, name string, ts int64, v any) pmetric.NumberDataPoint {
	m := b.metrics(service, pod).AppendEmpty()
	m.SetName(name)
	m.SetUnit("By")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(mcTS(ts))
	mcSetNumber(dp, v)
	return dp
}

// cumSum adds a monotonic cumulative Sum with one point; start 0 leaves StartTimestamp unset.
func (b *mcBatch) cumSum(service, pod, name string, start, ts int64, v any) {
	m := b.metrics(service, pod).AppendEmpty()
	m.SetName(name)
	m.SetUnit("{request}")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	if start != 0 {
		dp.SetStartTimestamp(mcTS(start))
	}
	dp.SetTimestamp(mcTS(ts))
	mcSetNumber(dp, v)
}

// hist adds an explicit-bounds Histogram with one point.
func (b *mcBatch) hist(service, pod, name string, temp pmetric.AggregationTemporality, start, ts int64,
	bounds []float64, counts []uint64, sum float64) {
	m := b.metrics(service, pod).AppendEmpty()
	m.SetName(name)
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(temp)
	dp := h.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(mcTS(start))
	dp.SetTimestamp(mcTS(ts))
	dp.ExplicitBounds().FromRaw(bounds)
	dp.BucketCounts().FromRaw(counts)
	var n uint64
	for _, c := range counts {
		n += c
	}
	dp.SetCount(n)
	dp.SetSum(sum)
}

// summary adds a Summary with one point.
func (b *mcBatch) summary(service, pod, name string, ts int64, count uint64, sum float64) {
	m := b.metrics(service, pod).AppendEmpty()
	m.SetName(name)
	m.SetUnit("By")
	dp := m.SetEmptySummary().DataPoints().AppendEmpty()
	dp.SetTimestamp(mcTS(ts))
	dp.SetCount(count)
	dp.SetSum(sum)
}

// ---- the component ----

type mcComponent interface {
	component.Component
	consumer.Metrics
}

// mcHarness is one component (connector metrics->metrics, or processor in a metrics pipeline) wired
// to a sink, with its own fake clock and self-telemetry.
type mcHarness struct {
	t       *testing.T
	clk     *clock.Fake
	sink    *consumertest.MetricsSink
	tel     *componenttest.Telemetry
	c       mcComponent
	stopped bool
}

const (
	mcFormConnector = "connector"
	mcFormProcessor = "processor"
)

func newMCHarness(t *testing.T, cfg *Config, form, name string) *mcHarness {
	t.Helper()
	must(t, cfg.Validate())
	h := &mcHarness{t: t, clk: useFakeClock(t), sink: new(consumertest.MetricsSink), tel: componenttest.NewTelemetry()}
	ctx := testContext(t)
	id := component.NewIDWithName(Type, name)
	var err error
	switch form {
	case mcFormConnector:
		set := connectortest.NewNopSettings(Type)
		set.ID = id
		set.TelemetrySettings = h.tel.NewTelemetrySettings()
		h.c, err = NewConnectorFactory().CreateMetricsToMetrics(ctx, set, cfg, h.sink)
	case mcFormProcessor:
		set := processortest.NewNopSettings(Type)
		set.ID = id
		set.TelemetrySettings = h.tel.NewTelemetrySettings()
		h.c, err = NewFactory().CreateMetrics(ctx, set, cfg, h.sink)
	}
	must(t, err)
	must(t, h.c.Start(ctx, componenttest.NewNopHost()))
	t.Cleanup(h.stop)
	return h
}

// send sets the wall clock to sec, hands md to the component, and settles.
func (h *mcHarness) send(sec int64, md pmetric.Metrics) {
	h.t.Helper()
	h.clk.Set(time.Unix(sec, 0))
	must(h.t, h.c.ConsumeMetrics(context.Background(), md))
	settleAll(h.t)
}

// stop shuts the component down: without storage every open window fires.
func (h *mcHarness) stop() {
	if !h.stopped {
		h.stopped = true
		must(h.t, h.c.Shutdown(context.Background()))
	}
}

// results is every data point delivered whose metric is one of the aggregation's (prefix "name.").
func (h *mcHarness) results(prefix string) []point {
	var out []point
	for _, p := range points(h.sink.AllMetrics()) {
		if strings.HasPrefix(p.metric, prefix+".") {
			out = append(out, p)
		}
	}
	return out
}

func mcConfig(aggs ...AggregationConfig) *Config {
	cfg := baseConfig()
	cfg.Aggregations = aggs
	return cfg
}

func mcAgg(name string, metricNames []string, outputs ...string) AggregationConfig {
	return AggregationConfig{Name: name, Signal: "metrics", Where: &WhereConfig{MetricNames: metricNames},
		GroupBy: keys("service.name"), Outputs: outputs}
}

// wantSeries asserts a metric's points for one attribute set, in arrival order, as "start-end:value".
func wantSeries(t *testing.T, ps []point, metric, attrs string, want ...string) {
	t.Helper()
	var got []string
	for _, p := range find(ps, metric, attrs) {
		got = append(got, fmt.Sprintf("%d-%d:%g", p.start, p.end, p.value))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s{%s} = %v, want %v", metric, attrs, got, want)
	}
}

const (
	mcSvcA = "service.name=a(Str)"
	mcSvcB = "service.name=b(Str)"
	mcSvcC = "service.name=c(Str)"
)

// ---- tests ----

// Gauges of several pods, aggregated by service.name (a resource attribute): the pod attribute is
// aggregated away. Both forms.
func TestMetricsContractGaugesByService(t *testing.T) {
	for _, form := range []string{mcFormConnector, mcFormProcessor} {
		t.Run(form, func(t *testing.T) {
			cfg := mcConfig(mcAgg("agg", []string{"g"}, "count", "sum", "avg", "min", "max"))
			h := newMCHarness(t, cfg, form, "gauges")

			b1 := newMCBatch()
			b1.gauge("a", "a1", "g", 1001, 10.0)
			b1.gauge("a", "a2", "g", 1002, 5) // an int gauge
			b1.gauge("b", "b1", "g", 1003, 100.0)
			b1.gauge("a", "a1", "other", 1002, 1e6) // not in metric_names: not a record
			before := pmetric.NewMetrics()
			b1.md.CopyTo(before)
			h.send(1006, b1.md)
			// Neither form mutates the data it receives.
			if form == mcFormConnector || !h.c.Capabilities().MutatesData {
				if !mcEqual(before, b1.md) {
					t.Errorf("%s mutated its input", form)
				}
			}

			b2 := newMCBatch()
			b2.gauge("a", "a1", "g", 1004, 20.0)
			b2.gauge("a", "a2", "g", 1006, 7)
			h.send(1009, b2.md)

			// W = 1012 >= 1010: window [1000, 1010) fires.
			b3 := newMCBatch()
			b3.gauge("a", "a1", "g", 1012, 3.0)
			h.send(1013, b3.md)
			h.stop() // fires [1010, 1020)

			ps := h.results("agg")
			// [1000,1010), a: values 10, 5, 20, 7: count 4, sum 42, avg 42/4 = 10.5, min 5, max 20.
			// b: value 100: count 1, sum = avg = min = max = 100.
			// [1010,1020), a: value 3. b has no record there: no point is expected (delta).
			wantSeries(t, ps, "agg.count", mcSvcA, "1000-1010:4", "1010-1020:1")
			wantSeries(t, ps, "agg.sum", mcSvcA, "1000-1010:42", "1010-1020:3")
			wantSeries(t, ps, "agg.avg", mcSvcA, "1000-1010:10.5", "1010-1020:3")
			wantSeries(t, ps, "agg.min", mcSvcA, "1000-1010:5", "1010-1020:3")
			wantSeries(t, ps, "agg.max", mcSvcA, "1000-1010:20", "1010-1020:3")
			wantSeries(t, ps, "agg.count", mcSvcB, "1000-1010:1")
			wantSeries(t, ps, "agg.sum", mcSvcB, "1000-1010:100")
			wantSeries(t, ps, "agg.avg", mcSvcB, "1000-1010:100")
			wantSeries(t, ps, "agg.min", mcSvcB, "1000-1010:100")
			wantSeries(t, ps, "agg.max", mcSvcB, "1000-1010:100")

			// Output: count a monotonic Sum of ints (delta here), sum a Sum of doubles, avg/min/max Gauges
			// of doubles; the unit of sum/avg/min/max is the input metric's ("By"). Group-by values read
			// from the resource are on the output resource too; pod is not.
			eachMetric(h.sink.AllMetrics(), func(res pcommon.Resource, m pmetric.Metric) {
				if !strings.HasPrefix(m.Name(), "agg.") {
					return
				}
				if _, ok := res.Attributes().Get("service.name"); !ok {
					t.Errorf("%s: output resource %v lacks service.name", m.Name(), res.Attributes().AsRaw())
				}
				if _, ok := res.Attributes().Get("pod"); ok {
					t.Errorf("%s: output resource %v carries pod", m.Name(), res.Attributes().AsRaw())
				}
				switch m.Name() {
				case "agg.count":
					if m.Type() != pmetric.MetricTypeSum || !m.Sum().IsMonotonic() ||
						m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta ||
						m.Sum().DataPoints().At(0).ValueType() != pmetric.NumberDataPointValueTypeInt {
						t.Errorf("agg.count: want a monotonic delta Sum of ints, got %v", m.Type())
					}
				case "agg.sum":
					if m.Type() != pmetric.MetricTypeSum || m.Sum().DataPoints().At(0).ValueType() != pmetric.NumberDataPointValueTypeDouble {
						t.Errorf("agg.sum: want a Sum of doubles, got %v", m.Type())
					}
				default:
					if m.Type() != pmetric.MetricTypeGauge || m.Gauge().DataPoints().At(0).ValueType() != pmetric.NumberDataPointValueTypeDouble {
						t.Errorf("%s: want a Gauge of doubles, got %v", m.Name(), m.Type())
					}
				}
				if m.Name() != "agg.count" && m.Unit() != "By" {
					t.Errorf("%s: unit %q, want the input's %q", m.Name(), m.Unit(), "By")
				}
			})

			all := points(h.sink.AllMetrics())
			switch form {
			case mcFormConnector:
				// The connector emits window results only, not its input.
				for _, p := range all {
					if !strings.HasPrefix(p.metric, "agg.") {
						t.Errorf("connector passed on input %s", p.metric)
					}
				}
			case mcFormProcessor:
				// The processor passes its input on unchanged: 6 points of g, 1 of other.
				var g, other int
				for _, p := range all {
					switch p.metric {
					case "g":
						g++
					case "other":
						other++
					}
				}
				if g != 6 || other != 1 {
					t.Errorf("processor passed on %d points of g and %d of other, want 6 and 1", g, other)
				}
			}
		})
	}
}

func mcEqual(a, b pmetric.Metrics) bool {
	var m pmetric.JSONMarshaler
	ja, _ := m.MarshalMetrics(a)
	jb, _ := m.MarshalMetrics(b)
	return string(ja) == string(jb)
}

// A monotonic cumulative Sum from several pods: increases per stream, resets by a drop and by a later
// StartTimestamp, first points that only set the base (start before the component started at 1000 s,
// or unset) and one that counts whole (start 1001, after the component started).
func TestMetricsContractCumulativeSum(t *testing.T) {
	cfg := mcConfig(mcAgg("req", []string{"requests"}, "count", "sum"))
	h := newMCHarness(t, cfg, mcFormConnector, "cumsum")
	step := func(clock int64, fill func(b *mcBatch)) {
		b := newMCBatch()
		fill(b)
		h.send(clock, b.md)
	}
	step(1001, func(b *mcBatch) {
		b.cumSum("a", "a1", "requests", 900, 1001, 100.0) // first, start 900 < 1000: base only
		b.cumSum("a", "a4", "requests", 900, 1001, 1000)  // first, start 900: base only
		b.cumSum("b", "b1", "requests", 950, 1001, 5)     // first, start 950: base only
	})
	step(1002, func(b *mcBatch) {
		b.cumSum("a", "a2", "requests", 1001, 1002, 7) // first, start 1001 >= 1000: counts whole, +7
		b.cumSum("a", "a3", "requests", 0, 1002, 50)   // first, no start: base only
	})
	step(1003, func(b *mcBatch) {
		b.cumSum("a", "a1", "requests", 900, 1003, 130.0) // 130 - 100 = +30
	})
	step(1004, func(b *mcBatch) {
		b.cumSum("a", "a3", "requests", 0, 1004, 60)      // 60 - 50 = +10
		b.cumSum("a", "a4", "requests", 1003, 1004, 2000) // start 1003 > 900: reset, whole +2000 (not +1000)
	})
	step(1005, func(b *mcBatch) {
		b.cumSum("a", "a1", "requests", 900, 1005, 10.0) // 10 < 130: reset, whole +10
	})
	step(1006, func(b *mcBatch) {
		b.cumSum("a", "a2", "requests", 1001, 1006, 9) // 9 - 7 = +2
	})
	step(1007, func(b *mcBatch) {
		b.cumSum("a", "a1", "requests", 900, 1007, 25.0) // 25 - 10 = +15
	})
	step(1008, func(b *mcBatch) {
		b.cumSum("b", "b1", "requests", 950, 1008, 8) // 8 - 5 = +3
	})
	step(1012, func(b *mcBatch) {
		b.cumSum("a", "a1", "requests", 900, 1012, 40.0) // 40 - 25 = +15, window [1010,1020); W = 1012 fires [1000,1010)
	})
	h.stop()

	ps := h.results("req")
	// [1000,1010), a: counted points a1@1003, a1@1005, a1@1007, a2@1002, a2@1006, a3@1004, a4@1004 = 7
	// (the bases a1@1001, a3@1002, a4@1001 add nothing, count included);
	// sum 30 + 10 + 15 + 7 + 2 + 10 + 2000 = 2074.
	// b: b1@1008 only: count 1, sum 3. [1010,1020), a: a1@1012: count 1, sum 15.
	wantSeries(t, ps, "req.count", mcSvcA, "1000-1010:7", "1010-1020:1")
	wantSeries(t, ps, "req.sum", mcSvcA, "1000-1010:2074", "1010-1020:15")
	wantSeries(t, ps, "req.count", mcSvcB, "1000-1010:1")
	wantSeries(t, ps, "req.sum", mcSvcB, "1000-1010:3")
	eachMetric(h.sink.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
		if m.Name() == "req.sum" && m.Unit() != "{request}" {
			t.Errorf("req.sum: unit %q, want the input's {request}", m.Unit())
		}
	})
}

// Histograms: delta ones with the aggregation's explicit bounds merge bucket by bucket; one with other
// bounds is in count and sum only; a cumulative one follows the per-stream rule bucket by bucket.
func TestMetricsContractHistograms(t *testing.T) {
	agg := mcAgg("lat", []string{"latency"}, "count", "sum", "histogram")
	agg.Histogram = &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{1.0, 5.0, 10.0}}}
	h := newMCHarness(t, mcConfig(agg), mcFormConnector, "hist")
	bounds := []float64{1, 5, 10}
	delta, cumulative := pmetric.AggregationTemporalityDelta, pmetric.AggregationTemporalityCumulative

	b := newMCBatch()
	b.hist("a", "a1", "latency", delta, 1000, 1002, bounds, []uint64{1, 1, 1, 0}, 9)         // 0.5 + 3 + 5.5
	b.hist("c", "c1", "latency", cumulative, 900, 1001, bounds, []uint64{1, 2, 2, 0}, 20)    // first, start 900: base
	b.hist("a", "a3", "latency", delta, 1000, 1003, []float64{2, 4}, []uint64{1, 1, 0}, 5.0) // other bounds: 1.5 + 3.5
	h.send(1003, b.md)
	b = newMCBatch()
	b.hist("a", "a2", "latency", delta, 1000, 1004, bounds, []uint64{0, 1, 2, 1}, 30)     // 2 + 6 + 7 + 15
	b.hist("c", "c1", "latency", cumulative, 900, 1005, bounds, []uint64{2, 3, 2, 1}, 35) // +[1 1 0 1], count +3, sum +15
	b.hist("b", "b1", "latency", delta, 1000, 1006, bounds, []uint64{2, 0, 0, 0}, 1)      // 0.25 + 0.75
	h.send(1006, b.md)
	h.stop()

	ps := h.results("lat")
	// a: count 3 + 4 + 2 = 9, sum 9 + 30 + 5 = 44; histogram a1 + a2 only: [1 2 3 1], count 7.
	// b: count 2, sum 1, histogram [2 0 0 0]. c: count 3, sum 15, histogram [1 1 0 1].
	wantSeries(t, ps, "lat.count", mcSvcA, "1000-1010:9")
	wantSeries(t, ps, "lat.sum", mcSvcA, "1000-1010:44")
	wantSeries(t, ps, "lat.histogram", mcSvcA, "1000-1010:7")
	wantSeries(t, ps, "lat.count", mcSvcB, "1000-1010:2")
	wantSeries(t, ps, "lat.sum", mcSvcB, "1000-1010:1")
	wantSeries(t, ps, "lat.histogram", mcSvcB, "1000-1010:2")
	wantSeries(t, ps, "lat.count", mcSvcC, "1000-1010:3")
	wantSeries(t, ps, "lat.sum", mcSvcC, "1000-1010:15")
	wantSeries(t, ps, "lat.histogram", mcSvcC, "1000-1010:3")

	wantBuckets := map[string][]uint64{"a": {1, 2, 3, 1}, "b": {2, 0, 0, 0}, "c": {1, 1, 0, 1}}
	// The sum of a histogram point, where it is set: only what its buckets hold (a: 9 + 30 = 39, never
	// 44, which includes the other-bounds histogram left out of it).
	wantSum := map[string]float64{"a": 39, "b": 1, "c": 15}
	seen := 0
	eachMetric(h.sink.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
		if m.Name() != "lat.histogram" {
			return
		}
		if m.Type() != pmetric.MetricTypeHistogram {
			t.Fatalf("lat.histogram is a %v, want an explicit Histogram", m.Type())
		}
		if m.Unit() != "s" {
			t.Errorf("lat.histogram: unit %q, want the input's s", m.Unit())
		}
		for i := 0; i < m.Histogram().DataPoints().Len(); i++ {
			dp := m.Histogram().DataPoints().At(i)
			svc, _ := dp.Attributes().Get("service.name")
			seen++
			if got := dp.ExplicitBounds().AsRaw(); fmt.Sprint(got) != fmt.Sprint(bounds) {
				t.Errorf("%s: bounds %v, want %v", svc.Str(), got, bounds)
			}
			if got, want := dp.BucketCounts().AsRaw(), wantBuckets[svc.Str()]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: buckets %v, want %v", svc.Str(), got, want)
			}
			if dp.HasSum() && dp.Sum() != wantSum[svc.Str()] {
				t.Errorf("%s: histogram sum %g, want %g (or none)", svc.Str(), dp.Sum(), wantSum[svc.Str()])
			}
		}
	})
	if seen != 3 {
		t.Errorf("%d histogram points, want 3", seen)
	}
	// "is counted": the docs name the counter incompatible_histograms.
	if got := counterIncluding(t, h.tel, "otelcol_window_aggregator_incompatible_histograms", nil); got != 1 {
		t.Errorf("incompatible_histograms = %d, want 1", got)
	}
}

// Summaries and points flagged as having no recorded value are counted (self-telemetry), not
// aggregated: they add nothing to any output, count included.
func TestMetricsContractSummaryAndNoRecordedValue(t *testing.T) {
	h := newMCHarness(t, mcConfig(mcAgg("q", []string{"g", "s"}, "count", "sum", "max")), mcFormConnector, "summary")
	b := newMCBatch()
	b.summary("a", "a1", "s", 1002, 10, 100)
	b.gauge("a", "a1", "g", 1003, 4.0)
	b.gauge("a", "a2", "g", 1004, 999.0).SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	h.send(1005, b.md)
	h.stop()
	ps := h.results("q")
	// Only g@1003 = 4 is aggregated: count 1, sum 4, max 4.
	wantSeries(t, ps, "q.count", mcSvcA, "1000-1010:1")
	wantSeries(t, ps, "q.sum", mcSvcA, "1000-1010:4")
	wantSeries(t, ps, "q.max", mcSvcA, "1000-1010:4")
	// Counted: the docs name metric_points{outcome=summary|no_recorded_value}.
	for _, outcome := range []string{"summary", "no_recorded_value"} {
		if got := counterIncluding(t, h.tel, "otelcol_window_aggregator_metric_points", map[string]string{"outcome": outcome}); got != 1 {
			t.Errorf("metric_points{outcome=%s} = %d, want 1", outcome, got)
		}
	}
	if got := counterIncluding(t, h.tel, "otelcol_window_aggregator_late_records", nil); got != 0 {
		t.Errorf("late_records = %d, want 0", got)
	}
}

// A window result is never aggregated again, whatever its name: the aggregation names its own outputs
// in metric_names, and the results are fed back to the connector.
func TestMetricsContractResultsNotInput(t *testing.T) {
	cfg := mcConfig(mcAgg("agg", []string{"g", "agg.count", "agg.sum"}, "count", "sum"))
	h := newMCHarness(t, cfg, mcFormConnector, "loop")
	b := newMCBatch()
	b.gauge("a", "a1", "g", 1002, 1.0)
	b.gauge("a", "a2", "g", 1004, 2.0)
	h.send(1005, b.md)
	b = newMCBatch()
	b.gauge("a", "a1", "g", 1011, 5.0) // W = 1011: [1000,1010) fires: count 2, sum 3
	h.send(1011, b.md)
	fired := h.sink.AllMetrics()
	if len(fired) == 0 {
		t.Fatal("window [1000,1010) did not fire")
	}
	for _, md := range fired { // results stamped 1010: they would fall in [1010,1020)
		again := pmetric.NewMetrics()
		md.CopyTo(again)
		h.send(1011, again)
	}
	h.stop()
	ps := h.results("agg")
	// [1010,1020) holds g@1011 = 5 alone: count 1, sum 5 (not 1 + the fed-back points).
	wantSeries(t, ps, "agg.count", mcSvcA, "1000-1010:2", "1010-1020:1")
	wantSeries(t, ps, "agg.sum", mcSvcA, "1000-1010:3", "1010-1020:5")
}

// Through the connector, a point later than allowed_lateness, one without a timestamp and one beyond
// max_future_skew are counted in late_records and dropped; one within allowed_lateness is added (a
// late firing, revise).
func TestMetricsContractLateThroughConnector(t *testing.T) {
	cfg := mcConfig(mcAgg("agg", []string{"g"}, "count", "sum"))
	cfg.AllowedLateness = 5 * time.Second
	h := newMCHarness(t, cfg, mcFormConnector, "late")
	one := func(clock, ts int64, v float64) {
		b := newMCBatch()
		b.gauge("a", "a1", "g", ts, v)
		h.send(clock, b.md)
	}
	one(1005, 1001, 1)   // [1000,1010)
	one(1013, 1012, 2)   // W = 1012: [1000,1010) fires: count 1, sum 1
	one(1020, 1020, 3)   // W = 1020: [1010,1020) fires: count 1, sum 2; [1000,1010) expired (1020 >= 1010 + 5)
	one(1020, 1003, 100) // [1000,1010): expired: late, dropped
	one(1020, 1016, 4)   // [1010,1020): 1020 <= W = 1020 < 1025: added, late firing (revise): count 1, sum 4
	one(1020, 0, 200)    // no timestamp: invalid, dropped
	one(1020, 1400, 300) // 1400 > now 1020 + max_future_skew 300 = 1320: dropped
	h.stop()             // [1020,1030) fires: count 1, sum 3

	ps := h.results("agg")
	wantSeries(t, ps, "agg.count", mcSvcA, "1000-1010:1", "1010-1020:1", "1010-1020:1", "1020-1030:1")
	wantSeries(t, ps, "agg.sum", mcSvcA, "1000-1010:1", "1010-1020:2", "1010-1020:4", "1020-1030:3")
	for _, p := range points(h.sink.AllMetrics()) {
		if !strings.HasPrefix(p.metric, "agg.") {
			t.Errorf("the connector's output carries %s, want window results only", p.metric)
		}
	}
	// 3 points counted in late_records (1003 expired, 0 invalid, 1400 future).
	if got := counterIncluding(t, h.tel, "otelcol_window_aggregator_late_records", nil); got != 3 {
		t.Errorf("late_records = %d, want 3", got)
	}
	for _, reason := range []string{"expired", "invalid", "future"} { // the README's reasons
		if got := counterIncluding(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": reason, "action": "dropped"}); got != 1 {
			t.Errorf("late_records{reason=%s,action=dropped} = %d, want 1", reason, got)
		}
	}
}

// The processor with drop_aggregated_input removes the points it aggregated and passes on the others
// (a metric no aggregation names, a summary, a point past its windows); without it, it passes every
// point on. Both add the window results.
func TestMetricsContractProcessorDropAggregatedInput(t *testing.T) {
	for _, drop := range []bool{true, false} {
		t.Run(fmt.Sprintf("drop=%v", drop), func(t *testing.T) {
			cfg := mcConfig(mcAgg("agg", []string{"g", "s"}, "count", "sum"))
			cfg.DropAggregatedInput = drop
			h := newMCHarness(t, cfg, mcFormProcessor, fmt.Sprintf("drop%v", drop))
			b := newMCBatch()
			b.gauge("a", "a1", "g", 1002, 1.0)
			b.gauge("a", "a1", "other", 1002, 2.0)
			b.summary("a", "a1", "s", 1002, 3, 30)
			b.gauge("a", "a2", "g", 1003, 4.0)
			before := pmetric.NewMetrics()
			b.md.CopyTo(before)
			h.send(1005, b.md)
			if !h.c.Capabilities().MutatesData && !mcEqual(before, b.md) {
				t.Errorf("the processor changed its input without declaring MutatesData")
			}
			b = newMCBatch()
			b.gauge("a", "a1", "g", 1020, 5.0) // W = 1020: [1000,1010) fires (count 2, sum 5) and expires
			h.send(1020, b.md)
			b = newMCBatch()
			b.gauge("a", "a1", "g", 1001, 6.0) // expired: not aggregated
			h.send(1020, b.md)
			h.stop()

			ps := h.results("agg")
			// [1000,1010): g@1002 = 1, g@1003 = 4: count 2, sum 5. [1020,1030): g@1020 = 5.
			wantSeries(t, ps, "agg.count", mcSvcA, "1000-1010:2", "1020-1030:1")
			wantSeries(t, ps, "agg.sum", mcSvcA, "1000-1010:5", "1020-1030:5")

			var passed []string
			for _, p := range points(h.sink.AllMetrics()) {
				if !strings.HasPrefix(p.metric, "agg.") {
					passed = append(passed, fmt.Sprintf("%s@%d", p.metric, p.end))
				}
			}
			var summaries int
			eachMetric(h.sink.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
				if m.Name() == "s" {
					summaries += m.Summary().DataPoints().Len()
				}
			})
			// points() skips summaries: count them apart.
			want := "g@1002 other@1002 g@1003 g@1020 g@1001"
			if drop {
				// The aggregated g@1002, g@1003, g@1020 go; other and the expired g@1001 pass.
				want = "other@1002 g@1001"
			}
			if got := strings.Join(passed, " "); got != want {
				t.Errorf("passed on %q, want %q", got, want)
			}
			if summaries != 1 {
				t.Errorf("passed on %d summary points, want 1 (a summary is not aggregated)", summaries)
			}
		})
	}
}

// Kinds of Sum and the input stream: a non-monotonic Sum is a value per point (no base, no increase);
// a monotonic delta Sum adds its value; points of one resource, scope and metric with different
// attributes are different streams; a first point whose StartTimestamp equals the component's start
// (1000 s, "not before" it) counts whole. group_by looks a key up on the point, then the scope, then
// the resource.
func TestMetricsContractSumKindsAndStreams(t *testing.T) {
	cfg := mcConfig(
		mcAgg("nm", []string{"queue"}, "count", "sum"),
		mcAgg("dl", []string{"bytes"}, "count", "sum"),
		mcAgg("st", []string{"requests"}, "count", "sum"),
	)
	h := newMCHarness(t, cfg, mcFormConnector, "kinds")
	numberSum := func(b *mcBatch, service, pod, name string, monotonic bool, temp pmetric.AggregationTemporality,
		start, ts int64, v any, attrs map[string]any) {
		m := b.metrics(service, pod).AppendEmpty()
		m.SetName(name)
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(monotonic)
		sum.SetAggregationTemporality(temp)
		dp := sum.DataPoints().AppendEmpty()
		if start != 0 {
			dp.SetStartTimestamp(mcTS(start))
		}
		dp.SetTimestamp(mcTS(ts))
		mcSetNumber(dp, v)
		must(t, dp.Attributes().FromRaw(attrs))
	}
	cum, delta := pmetric.AggregationTemporalityCumulative, pmetric.AggregationTemporalityDelta
	b := newMCBatch()
	numberSum(b, "a", "a1", "queue", false, cum, 900, 1001, 10, nil)  // non-monotonic: value 10
	numberSum(b, "a", "a1", "bytes", true, delta, 1000, 1001, 7, nil) // delta: +7
	numberSum(b, "a", "a1", "requests", true, cum, 900, 1001, 10, map[string]any{"route": "/x"})
	numberSum(b, "a", "a1", "requests", true, cum, 900, 1001, 50, map[string]any{"route": "/y"}) // another stream: base
	numberSum(b, "a", "a2", "requests", true, cum, 1000, 1001, 4, nil)                           // start = 1000: whole, +4
	// A point attribute service.name=z overrides the resource's a.
	numberSum(b, "a", "a3", "bytes", true, delta, 1000, 1002, 1, map[string]any{"service.name": "z"})
	h.send(1002, b.md)
	b = newMCBatch()
	numberSum(b, "a", "a1", "queue", false, cum, 900, 1003, 4, nil)                              // value 4 (not an increase, not a reset)
	numberSum(b, "a", "a1", "bytes", true, delta, 1001, 1003, 3, nil)                            // +3
	numberSum(b, "a", "a1", "requests", true, cum, 900, 1003, 20, map[string]any{"route": "/x"}) // +10
	numberSum(b, "a", "a1", "requests", true, cum, 900, 1003, 55, map[string]any{"route": "/y"}) // +5
	h.send(1003, b.md)
	h.stop()

	ps := h.results("nm")
	// queue, a: values 10 and 4: count 2, sum 14.
	wantSeries(t, ps, "nm.count", mcSvcA, "1000-1010:2")
	wantSeries(t, ps, "nm.sum", mcSvcA, "1000-1010:14")
	ps = h.results("dl")
	// bytes, a: 7 + 3 = 10 from 2 points; z: 1 from 1 point.
	wantSeries(t, ps, "dl.count", mcSvcA, "1000-1010:2")
	wantSeries(t, ps, "dl.sum", mcSvcA, "1000-1010:10")
	wantSeries(t, ps, "dl.count", "service.name=z(Str)", "1000-1010:1")
	wantSeries(t, ps, "dl.sum", "service.name=z(Str)", "1000-1010:1")
	ps = h.results("st")
	// requests, a: a2's first point +4 (start 1000 is not before the start), /x +10, /y +5:
	// count 3, sum 19.
	wantSeries(t, ps, "st.count", mcSvcA, "1000-1010:3")
	wantSeries(t, ps, "st.sum", mcSvcA, "1000-1010:19")
}

// Exponential histograms merge into the (default) exponential histogram output at the coarser scale.
func TestMetricsContractExponentialHistograms(t *testing.T) {
	h := newMCHarness(t, mcConfig(mcAgg("eh", []string{"lat"}, "count", "sum", "histogram")), mcFormConnector, "exp")
	expo := func(b *mcBatch, pod string, ts int64, scale int32, counts []uint64, sum float64) {
		m := b.metrics("a", pod).AppendEmpty()
		m.SetName("lat")
		m.SetUnit("s")
		eh := m.SetEmptyExponentialHistogram()
		eh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		dp := eh.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(mcTS(1000))
		dp.SetTimestamp(mcTS(ts))
		dp.SetScale(scale)
		dp.Positive().SetOffset(0)
		dp.Positive().BucketCounts().FromRaw(counts)
		var n uint64
		for _, c := range counts {
			n += c
		}
		dp.SetCount(n)
		dp.SetSum(sum)
	}
	b := newMCBatch()
	// scale 0: bucket i is (2^i, 2^(i+1)]: (1,2] 2 values (1.5, 1.5), (2,4] 1 value (3): sum 6.
	expo(b, "a1", 1002, 0, []uint64{2, 1}, 6)
	// scale 1: bucket i is (2^(i/2), 2^((i+1)/2)]: (1,1.41] 1 (1.2), (1.41,2] 1 (1.8): sum 3. At scale
	// 0 both fall in (1,2].
	expo(b, "a2", 1003, 1, []uint64{1, 1}, 3)
	h.send(1004, b.md)
	h.stop()
	ps := h.results("eh")
	// count 3 + 2 = 5, sum 6 + 3 = 9; histogram at scale 0: offset 0, [2+2, 1] = [4 1].
	wantSeries(t, ps, "eh.count", mcSvcA, "1000-1010:5")
	wantSeries(t, ps, "eh.sum", mcSvcA, "1000-1010:9")
	wantSeries(t, ps, "eh.histogram", mcSvcA, "1000-1010:5")
	eachMetric(h.sink.AllMetrics(), func(_ pcommon.Resource, m pmetric.Metric) {
		if m.Name() != "eh.histogram" {
			return
		}
		if m.Type() != pmetric.MetricTypeExponentialHistogram {
			t.Fatalf("eh.histogram is a %v, want an ExponentialHistogram", m.Type())
		}
		dp := m.ExponentialHistogram().DataPoints().At(0)
		got := fmt.Sprintf("scale %d offset %d %v", dp.Scale(), dp.Positive().Offset(), dp.Positive().BucketCounts().AsRaw())
		if want := "scale 0 offset 0 [4 1]"; got != want {
			t.Errorf("eh.histogram: %s, want %s", got, want)
		}
	})
}
