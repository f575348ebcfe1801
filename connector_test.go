package windowaggregator

import (
	"context"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func latencyConfig() *Config {
	cfg := baseConfig()
	cfg.AllowedLateness = 5 * time.Second
	cfg.Aggregations = []AggregationConfig{{
		Name: "lat", Signal: "spans", GroupBy: keys("service.name", "span.name"),
		Outputs: []string{"count", "sum", "avg", "min", "max", "p50", "histogram"},
	}}
	return cfg
}

const (
	attrsAX = "service.name=a(Str),span.name=/x(Str)"
	attrsAY = "service.name=a(Str),span.name=/y(Str)"
	attrsBX = "service.name=b(Str),span.name=/x(Str)"
)

func wantPoint(t *testing.T, ps []point, metric, attrs string, start, end int64, value float64) point {
	t.Helper()
	var got []point
	for _, p := range find(ps, metric, attrs) {
		if p.start == start {
			got = append(got, p)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%s{%s}: %d points, want 1: %+v", metric, attrs, len(got), got)
	}
	p := got[0]
	if p.start != start || p.end != end || math.Abs(p.value-value) > 1e-9*math.Max(1, math.Abs(value)) {
		t.Fatalf("%s{%s}: [%d,%d) = %v, want [%d,%d) = %v", metric, attrs, p.start, p.end, p.value, start, end, value)
	}
	return p
}

func TestConnectorTumblingWindowsLatenessAndRouting(t *testing.T) {
	for _, order := range []string{"metrics instance first", "traces instance first"} {
		t.Run(order, func(t *testing.T) {
			useFakeClock(t) // wall clock 1000 s
			h := newConnectorHarness(t, latencyConfig(), true)
			if order == "traces instance first" {
				h.traces[0], h.traces[1] = h.traces[1], h.traces[0]
			}
			h.sendTraces(traces(
				spanSpec{service: "a", name: "/x", end: 1, ms: 10},
				spanSpec{service: "a", name: "/x", end: 2, ms: 30},
				spanSpec{service: "a", name: "/y", end: 3, ms: 5},
				spanSpec{service: "b", name: "/x", end: 4, ms: 100},
			))
			if n := len(h.metrics.AllMetrics()); n != 0 {
				t.Fatalf("results before the window closed: %d batches", n)
			}
			h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 11, ms: 20})) // W = 11: [0,10) fires
			ps := points(h.metrics.AllMetrics())
			// Hand-computed from the spans above.
			c := wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 2)
			if c.typ != pmetric.MetricTypeSum || c.temporality != pmetric.AggregationTemporalityDelta || !c.monotonic {
				t.Fatalf("count must be a delta monotonic sum: %+v", c)
			}
			if c.resource != "service.name=a(Str)" {
				t.Fatalf("group-by values from the resource go on the output resource: %q", c.resource)
			}
			if sum := wantPoint(t, ps, "lat.sum", attrsAX, 0, 10, 40); !sum.monotonic || sum.temporality != pmetric.AggregationTemporalityDelta {
				t.Fatalf("sum: %+v", sum)
			}
			if g := wantPoint(t, ps, "lat.avg", attrsAX, 0, 10, 20); g.typ != pmetric.MetricTypeGauge {
				t.Fatalf("avg must be a gauge: %+v", g)
			}
			wantPoint(t, ps, "lat.min", attrsAX, 0, 10, 10)
			wantPoint(t, ps, "lat.max", attrsAX, 0, 10, 30)
			if p50 := find(ps, "lat.p50", attrsAX); len(p50) != 1 || math.Abs(p50[0].value-10)/10 > 0.01 {
				t.Fatalf("p50 of {10, 30} (nearest rank 0) = %+v, want 10 within 1%%", p50)
			}
			if hp := wantPoint(t, ps, "lat.histogram", attrsAX, 0, 10, 2); hp.sum != 40 || hp.typ != pmetric.MetricTypeExponentialHistogram {
				t.Fatalf("histogram: %+v", hp)
			}
			wantPoint(t, ps, "lat.count", attrsAY, 0, 10, 1)
			wantPoint(t, ps, "lat.sum", attrsBX, 0, 10, 100)

			// Within allowed_lateness (W = 11 < 10 + 5): a late firing with deltas and corrected values.
			h.metrics.Reset()
			h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 5, ms: 50}))
			ps = points(h.metrics.AllMetrics())
			wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 1)
			wantPoint(t, ps, "lat.sum", attrsAX, 0, 10, 50)
			wantPoint(t, ps, "lat.avg", attrsAX, 0, 10, 30) // (10+30+50)/3
			wantPoint(t, ps, "lat.min", attrsAX, 0, 10, 10)
			wantPoint(t, ps, "lat.max", attrsAX, 0, 10, 50)
			if hp := wantPoint(t, ps, "lat.histogram", attrsAX, 0, 10, 1); hp.sum != 50 {
				t.Fatalf("late histogram must hold the late record alone: %+v", hp)
			}
			if len(find(ps, "lat.count", attrsAY)) != 0 {
				t.Fatal("a series without late records fired again")
			}
			if h.lateTraces.SpanCount() != 0 {
				t.Fatal("a record within allowed_lateness was routed as late")
			}

			// Beyond allowed_lateness: routed with its reason; invalid and future too.
			h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 16, ms: 1})) // W = 16 >= 15
			h.metrics.Reset()
			h.sendTraces(traces(
				spanSpec{service: "a", name: "/x", end: 6, ms: 7, attrs: map[string]any{"k": "v"}},
				spanSpec{service: "a", name: "/x", end: 0},
				spanSpec{service: "b", name: "/x", end: 1000 + 5*60 + 1, ms: 1},
			))
			if len(h.metrics.AllMetrics()) != 0 {
				t.Fatal("late, invalid or future records changed results")
			}
			got := map[string]int{}
			var expired ptrace.Span
			for _, td := range h.lateTraces.AllTraces() {
				rss := td.ResourceSpans()
				for i := 0; i < rss.Len(); i++ {
					spans := rss.At(i).ScopeSpans().At(0).Spans()
					for j := 0; j < spans.Len(); j++ {
						r, _ := spans.At(j).Attributes().Get(ingest.AttrLateReason)
						got[r.Str()]++
						if r.Str() == reasonExpired {
							expired = spans.At(j)
						}
					}
				}
			}
			if got[reasonExpired] != 1 || got[reasonInvalid] != 1 || got[reasonFuture] != 1 || len(got) != 3 {
				t.Fatalf("routed by reason: %v, want one each of expired, invalid, future", got)
			}
			if w, _ := expired.Attributes().Get(ingest.AttrWatermark); w.Int() != 16*s {
				t.Fatalf("watermark attribute %v, want %d", w.AsRaw(), 16*s)
			}
			if k, _ := expired.Attributes().Get("k"); k.Str() != "v" || expired.Name() != "/x" {
				t.Fatal("the routed span lost its own data")
			}
			// Telemetry: 4+1 on time, 1 late-updated, 1+... aggregated; 3 routed.
			wantCounter(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "expired", "action": "routed"}, 1)
			wantCounter(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "invalid", "action": "routed"}, 1)
			wantCounter(t, h.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"}, 6)
			wantCounter(t, h.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "late_updated"}, 1)
		})
	}
}

func TestInputIsNotMutated(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, latencyConfig(), true)
	td := traces(spanSpec{service: "a", name: "/x", end: 1, ms: 1}, spanSpec{service: "a", name: "/x", end: 0})
	before := ptrace.NewTraces()
	td.CopyTo(before)
	td.MarkReadOnly() // the collector marks shared data read-only: any write would panic
	h.sendTraces(td)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 30, ms: 1}))
	if td.SpanCount() != before.SpanCount() {
		t.Fatal("input changed")
	}
}

func TestSlidingWindowsThroughTheConnector(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Window.Size, cfg.Window.Slide = 20*time.Second, 10*time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", Outputs: []string{"count", "max"}}}
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 5, ms: 1}, spanSpec{service: "a", name: "x", end: 15, ms: 3}))
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 40, ms: 2})) // W = 40: windows ending 10, 20, 30 fire
	ps := points(h.metrics.AllMetrics())
	// t=5 in [-10,10) and [0,20); t=15 in [0,20) and [10,30). The delta points are of one slide each:
	// [0,10) has t=5, [10,20) t=15, [20,30) nothing (its window [10,30) holds t=15).
	wantPoint(t, ps, "n.count", "", 0, 10, 1)
	wantPoint(t, ps, "n.count", "", 10, 20, 1)
	wantPoint(t, ps, "n.count", "", 20, 30, 0)
	if mx := find(ps, "n.max", ""); len(mx) != 3 || mx[1].value != 3 {
		t.Fatalf("max per window: %+v", mx)
	}
}

func TestOverflowSeriesThroughTheConnector(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.MaxSeries = 2
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("span.name")}}
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(
		spanSpec{service: "a", name: "p", end: 1}, spanSpec{service: "a", name: "q", end: 1},
		spanSpec{service: "a", name: "r", end: 1}, spanSpec{service: "a", name: "s", end: 2}, spanSpec{service: "a", name: "p", end: 2},
	))
	h.sendTraces(traces(spanSpec{service: "a", name: "p", end: 10}))
	ps := points(h.metrics.AllMetrics())
	wantPoint(t, ps, "n.count", "span.name=p(Str)", 0, 10, 2)
	wantPoint(t, ps, "n.count", "span.name=q(Str)", 0, 10, 1)
	wantPoint(t, ps, "n.count", "otel.metric.overflow=true(Bool)", 0, 10, 2)
	if len(ps) != 3 {
		t.Fatalf("want 3 points (p, q, overflow), got %+v", ps)
	}
}

// The exponential histogram output is downscaled to fit max_size buckets per sign. Values 1 and 1e6 sit in
// buckets -1 and 1275 at scale 6 (bucket i is (2^(i/64), 2^((i+1)/64)]; log2(1e6) = 19.93): 1277
// buckets. Each scale down halves the indices (floor): at scale 2 they are -1 and 79, 81 buckets, the
// first that fits in 160 (scale 3 needs 161). With 4096 the output keeps scale 6.
func TestHistogramOutputFitsMaxSize(t *testing.T) {
	for _, c := range []struct {
		maxSize   int
		scale     int32
		offset    int32
		nBuckets  int
		lastIndex int
	}{{0, 2, -1, 81, 80}, {4096, 6, -1, 1277, 1276}} {
		useFakeClock(t)
		cfg := baseConfig()
		cfg.Aggregations = []AggregationConfig{{Name: "v", Signal: "logs", Value: ValueConfig{Source: "attribute:v"},
			Outputs: []string{"histogram"}, Histogram: &HistogramConfig{Exponential: &ExponentialHistogramConfig{MaxSize: c.maxSize}}}}
		h := newConnectorHarness(t, cfg, true)
		h.sendLogs(logs(logSpec{service: "a", ts: 1, attrs: map[string]any{"v": 1}},
			logSpec{service: "a", ts: 2, attrs: map[string]any{"v": 1e6}}))
		h.sendLogs(logs(logSpec{service: "a", ts: 10}))
		var found bool
		for _, md := range h.metrics.AllMetrics() {
			ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
			for i := 0; i < ms.Len(); i++ {
				if ms.At(i).Name() != "v.histogram" {
					continue
				}
				dp := ms.At(i).ExponentialHistogram().DataPoints().At(0)
				bc := dp.Positive().BucketCounts()
				if dp.Scale() != c.scale || dp.Positive().Offset() != c.offset || bc.Len() != c.nBuckets ||
					bc.At(0) != 1 || bc.At(c.lastIndex) != 1 || dp.Count() != 2 || dp.Negative().BucketCounts().Len() != 0 {
					t.Fatalf("max %d: scale %d offset %d buckets %d (%v), count %d; want scale %d offset %d, %d buckets with 1 at 0 and %d",
						c.maxSize, dp.Scale(), dp.Positive().Offset(), bc.Len(), bc.AsRaw(), dp.Count(), c.scale, c.offset, c.nBuckets, c.lastIndex)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("max %d: no histogram point", c.maxSize)
		}
	}
}

func TestLogsWithNumericAttributeAndSeverity(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{
		Name: "bytes", Signal: "logs", GroupBy: keys("severity.text", "tenant"), Value: ValueConfig{Source: "attribute:size"},
		Outputs: []string{"count", "sum", "max"},
	}}
	h := newConnectorHarness(t, cfg, true)
	h.sendLogs(logs(
		logSpec{service: "a", ts: 1, severity: "ERROR", attrs: map[string]any{"size": 100, "tenant": int64(7)}},
		logSpec{service: "a", ts: 2, severity: "ERROR", attrs: map[string]any{"size": 2.5, "tenant": int64(7)}},
		logSpec{service: "a", ts: 3, severity: "ERROR", attrs: map[string]any{"size": "40", "tenant": int64(7)}},
		logSpec{service: "a", ts: 4, severity: "ERROR", attrs: map[string]any{"size": "big", "tenant": int64(7)}},
		logSpec{service: "a", observed: 5, severity: "INFO", attrs: map[string]any{"size": 1}}, // no timestamp: observed
		logSpec{service: "a", severity: "INFO"}, // neither: invalid
	))
	h.sendLogs(logs(logSpec{service: "a", ts: 10, severity: "INFO"}))
	ps := points(h.metrics.AllMetrics())
	const errT7 = "severity.text=ERROR(Str),tenant=7(Int)"
	wantPoint(t, ps, "bytes.count", errT7, 0, 10, 4) // "big" is counted, without a value
	wantPoint(t, ps, "bytes.sum", errT7, 0, 10, 142.5)
	wantPoint(t, ps, "bytes.max", errT7, 0, 10, 100)
	wantPoint(t, ps, "bytes.count", "severity.text=INFO(Str)", 0, 10, 1) // tenant absent: left out
	if h.lateLogs.LogRecordCount() != 1 {
		t.Fatalf("the log without timestamps should be routed: %d routed", h.lateLogs.LogRecordCount())
	}
	wantCounter(t, h.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "not_numeric"}, 1)
	// Without size: the invalid log and the one at 10, of which only the one at 10 was aggregated.
	wantCounter(t, h.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "missing"}, 1)
	// An expired record (W = 10, lateness 0) is late data: its missing value is not counted.
	h.sendLogs(logs(logSpec{service: "a", ts: 3, severity: "INFO"}, logSpec{service: "a", ts: 4, severity: "INFO", attrs: map[string]any{"size": "big"}}))
	wantCounter(t, h.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "missing"}, 1)
	wantCounter(t, h.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "not_numeric"}, 1)
}

func TestDropActionCountsAndDropsLateData(t *testing.T) {
	useFakeClock(t)
	cfg := latencyConfig()
	cfg.LateData.Action = "drop"
	h := newConnectorHarness(t, cfg, true)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 30, ms: 1}))
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1, ms: 1}, spanSpec{service: "a", name: "/x"}))
	if h.lateTraces.SpanCount() != 0 {
		t.Fatal("late data routed with action drop")
	}
	wantCounter(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "expired", "action": "dropped"}, 1)
	wantCounter(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "invalid", "action": "dropped"}, 1)
}

func TestShutdownWithoutStorageFiresOpenWindows(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, latencyConfig(), true)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1, ms: 10}, spanSpec{service: "a", name: "/x", end: 9, ms: 20}))
	h.sendTraces(traces(spanSpec{service: "b", name: "/x", end: 13, ms: 20})) // W = 13: [0,10) fires
	h.metrics.Reset()
	h.shutdown() // [10,20) is open: it fires as it stands
	ps := points(h.metrics.AllMetrics())
	wantPoint(t, ps, "lat.count", attrsBX, 10, 20, 1)
	if len(find(ps, "lat.count", attrsAX)) != 0 {
		t.Fatal("a window fired twice")
	}
}

func TestIdleTimeoutFiresOnTheTicker(t *testing.T) {
	clk := useFakeClock(t)
	cfg := latencyConfig()
	cfg.Watermark.IdleTimeout = 30 * time.Second
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1, ms: 10}))
	clk.Advance(31 * time.Second)
	lookup(t).emit(context.Background(), false) // a collection and a delivery, as at each tick
	wantPoint(t, points(h.metrics.AllMetrics()), "lat.count", attrsAX, 0, 10, 1)
}

// lookup returns the shared state of the default id.
func lookup(t *testing.T) *shared {
	t.Helper()
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, st := range registry {
		return st
	}
	t.Fatal("no shared state")
	return nil
}

// Two aggregations whose group-by values come from the resource with equal values but other keys get
// resources of their own, with their own keys.
func TestOutputResourcesKeepTheirKeys(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{
		{Name: "a", Signal: "spans", GroupBy: keys("service.name")},
		{Name: "b", Signal: "spans", GroupBy: keys("host.name")},
	}
	h := newConnectorHarness(t, cfg, false)
	td := traces(spanSpec{service: "x", name: "s", end: 1})
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("host.name", "x")
	h.sendTraces(td)
	h.sendTraces(traces(spanSpec{service: "x", name: "s", end: 10}))
	seen := map[string]int{}
	for _, p := range points(h.metrics.AllMetrics()) {
		want := map[string]string{"a.count": "service.name=x(Str)", "b.count": "host.name=x(Str)"}[p.metric]
		if p.resource != want || p.attrs != want {
			t.Errorf("%s: resource %q, attributes %q; want both %q", p.metric, p.resource, p.attrs, want)
		}
		seen[p.metric]++
	}
	if seen["a.count"] != 1 || seen["b.count"] != 1 || len(seen) != 2 {
		t.Fatalf("points per metric %v, want one a.count and one b.count", seen)
	}
}

// Two aggregations whose results carry the same resource attributes share one output resource.
func TestAggregationsWithOneResourceShareIt(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{
		{Name: "a", Signal: "spans", GroupBy: keys("service.name")},
		{Name: "b", Signal: "spans", GroupBy: keys("service.name", "span.name")},
	}
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(spanSpec{service: "x", name: "s", end: 1}))
	h.sendTraces(traces(spanSpec{service: "x", name: "s", end: 10}))
	var resources []string
	for _, md := range h.metrics.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			resources = append(resources, attrString(rm.Resource().Attributes()))
			if n := rm.ScopeMetrics().Len(); n != 1 {
				t.Fatalf("%d scopes under one resource, want one for both aggregations", n)
			}
		}
	}
	if len(resources) != 1 || resources[0] != "service.name=x(Str)" {
		t.Fatalf("resources %q, want one: service.name=x(Str)", resources)
	}
	if ps := points(h.metrics.AllMetrics()); len(find(ps, "a.count", "service.name=x(Str)")) != 1 ||
		len(find(ps, "b.count", "service.name=x(Str),span.name=s(Str)")) != 1 {
		t.Fatalf("points %v, want one a.count and one b.count", ps)
	}
}

// A processor and a connector with one id share one state, so their settings must agree.
func TestSameIDWithOtherSettingsIsRefused(t *testing.T) {
	set := processortest.NewNopSettings(Type)
	p, err := NewFactory().CreateMetrics(testContext(t), set, latencyConfig(), consumertest.NewNop())
	must(t, err)
	defer func() { _ = p.Shutdown(context.Background()) }()
	other := latencyConfig()
	other.AllowedLateness = time.Minute
	cset := connectortest.NewNopSettings(Type)
	cset.ID = set.ID
	_, err = NewConnectorFactory().CreateTracesToMetrics(testContext(t), cset, other, consumertest.NewNop())
	if err == nil || !strings.Contains(err.Error(), "configured differently") {
		t.Fatalf("err = %v", err)
	}
}

// TestSpanKindAndStatusAsKeysAndConditions: the span kind and status code are read only when some
// aggregation needs them, so each way of needing them is tried with that aggregation alone.
func TestSpanKindAndStatusAsKeysAndConditions(t *testing.T) {
	cases := []struct {
		name string
		agg  AggregationConfig
		want map[string]float64 // count by attributes
	}{
		{"group by kind and status", AggregationConfig{GroupBy: keys("span.kind", "status.code")}, map[string]float64{
			"span.kind=SPAN_KIND_SERVER(Str),status.code=STATUS_CODE_ERROR(Str)": 1,
			"span.kind=SPAN_KIND_CLIENT(Str),status.code=STATUS_CODE_UNSET(Str)": 2,
			"span.kind=SPAN_KIND_SERVER(Str),status.code=STATUS_CODE_OK(Str)":    1,
		}},
		{"where status", AggregationConfig{GroupBy: keys("service.name"),
			Where: &WhereConfig{Attributes: map[string]any{"status.code": "STATUS_CODE_ERROR"}}},
			map[string]float64{"service.name=a(Str)": 1}},
		{"where kind as an attribute", AggregationConfig{GroupBy: keys("service.name"),
			Where: &WhereConfig{Attributes: map[string]any{"span.kind": "SPAN_KIND_CLIENT"}}},
			map[string]float64{"service.name=a(Str)": 2}},
		{"neither", AggregationConfig{GroupBy: keys("service.name")}, map[string]float64{"service.name=a(Str)": 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			useFakeClock(t)
			cfg := baseConfig()
			c.agg.Name, c.agg.Signal, c.agg.Outputs = "n", "spans", []string{"count"}
			cfg.Aggregations = []AggregationConfig{c.agg}
			h := newConnectorHarness(t, cfg, false)
			td := traces(
				spanSpec{service: "a", name: "x", end: 1, kind: ptrace.SpanKindServer},
				spanSpec{service: "a", name: "x", end: 2, kind: ptrace.SpanKindClient},
				spanSpec{service: "a", name: "x", end: 3, kind: ptrace.SpanKindClient},
				spanSpec{service: "a", name: "x", end: 4, kind: ptrace.SpanKindServer},
			)
			spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
			spans.At(0).Status().SetCode(ptrace.StatusCodeError)
			spans.At(3).Status().SetCode(ptrace.StatusCodeOk)
			h.sendTraces(td)
			h.shutdown() // fires the open window
			got := map[string]float64{}
			for _, p := range points(h.metrics.AllMetrics()) {
				if p.metric == "n.count" && p.start == 0 {
					got[p.attrs] += p.value
				}
			}
			if !maps.Equal(got, c.want) {
				t.Fatalf("counts %v, want %v", got, c.want)
			}
		})
	}
}
