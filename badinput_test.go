package windowaggregator

import (
	"math"
	"strings"
	"testing"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestBadTimestampsAreRoutedWithTheirReason(t *testing.T) {
	useFakeClock(t) // wall clock 1000 s
	h := newConnectorHarness(t, latencyConfig(), true)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 500, ms: 1})) // W = 500
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	spans.AppendEmpty().SetName("zero") // no timestamps at all
	farFuture := spans.AppendEmpty()    // year ~2554: past uint64 range of the engine
	farFuture.SetName("far-future")
	farFuture.SetEndTimestamp(pcommon.Timestamp(math.MaxUint64))
	future := spans.AppendEmpty()
	future.SetName("future")
	future.SetEndTimestamp(pcommon.Timestamp(1000*s + 5*60*s + 1))
	past := spans.AppendEmpty()
	past.SetName("far-past")
	past.SetEndTimestamp(1)
	h.sendTraces(td)
	want := map[string]string{"zero": reasonInvalid, "far-future": reasonFuture, "future": reasonFuture, "far-past": reasonExpired}
	got := routedReasons(h)
	for name, reason := range want {
		if got[name] != reason {
			t.Errorf("%s: routed as %q, want %q", name, got[name], reason)
		}
	}
	if w := lookup(t).Engine.Watermark(); w != 500*s {
		t.Fatalf("watermark moved to %d by rejected records", w)
	}
}

func routedReasons(h *connectorHarness) map[string]string {
	out := map[string]string{}
	for _, td := range h.lateTraces.AllTraces() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				sps := sss.At(j).Spans()
				for k := 0; k < sps.Len(); k++ {
					r, _ := sps.At(k).Attributes().Get(ingest.AttrLateReason)
					out[sps.At(k).Name()] = r.Str()
				}
			}
		}
	}
	return out
}

func TestBadValuesAreCountedWithoutValue(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{
		{Name: "d", Signal: "spans", Outputs: []string{"count", "sum", "max"}},
		{Name: "v", Signal: "spans", Value: ValueConfig{Source: "attribute:v"}, Outputs: []string{"count", "sum", "max"}},
	}
	h := newConnectorHarness(t, cfg, false)
	td := traces(
		spanSpec{service: "a", name: "ok", end: 1, ms: 4, attrs: map[string]any{"v": 2.0}},
		spanSpec{service: "a", name: "nan", end: 1, ms: 1, attrs: map[string]any{"v": math.NaN()}},
		spanSpec{service: "a", name: "inf", end: 1, ms: 1, attrs: map[string]any{"v": math.Inf(-1)}},
		spanSpec{service: "a", name: "text", end: 1, ms: 1, attrs: map[string]any{"v": "n/a"}},
		spanSpec{service: "a", name: "map", end: 1, ms: 1, attrs: map[string]any{"v": map[string]any{"x": 1}}},
		spanSpec{service: "a", name: "none", end: 1, ms: 1},
	)
	// One span ends before it starts.
	back := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	back.SetName("backwards")
	back.SetEndTimestamp(pcommon.Timestamp(2 * s))
	back.SetStartTimestamp(pcommon.Timestamp(3 * s))
	h.sendTraces(td)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 10}))
	ps := points(h.metrics.AllMetrics())
	wantPoint(t, ps, "d.count", "", 0, 10, 7)
	wantPoint(t, ps, "d.max", "", 0, 10, 4) // the backwards span has no duration
	wantPoint(t, ps, "v.count", "", 0, 10, 7)
	wantPoint(t, ps, "v.sum", "", 0, 10, 2)
	for reason, n := range map[string]int64{"end_before_start": 1, "not_finite": 2, "not_numeric": 2, "missing": 3} { // missing: none, backwards, and the span at 10 {
		wantCounter(t, h.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": reason}, n)
	}
}

func TestVeryLongGroupByValuesAreCut(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("user")}}
	h := newConnectorHarness(t, cfg, false)
	long := strings.Repeat("é", 1<<20) // 2 MiB of two-byte runes
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 1, attrs: map[string]any{"user": long}},
		spanSpec{service: "a", name: "x", end: 2, attrs: map[string]any{"user": long + "tail"}}))
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 10}))
	md := h.metrics.AllMetrics()[0]
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	v, _ := dp.Attributes().Get("user")
	if len(v.Str()) != ingest.MaxKeyValueLen || !strings.HasPrefix(long, v.Str()) || dp.IntValue() != 2 {
		t.Fatalf("cut value of %d bytes, count %d; want the first %d bytes, both spans in one series", len(v.Str()), dp.IntValue(), ingest.MaxKeyValueLen)
	}
	wantCounter(t, h.tel, "otelcol_window_aggregator_truncated_keys", nil, 2)
}

func TestEmptyBatchesAndResources(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, latencyConfig(), true)
	h.sendTraces(ptrace.NewTraces())
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty()                            // a resource without scopes
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty() // a scope without spans
	h.sendTraces(td)
	h.sendLogs(plog.NewLogs())
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	h.sendLogs(ld)
	h.shutdown()
	if len(h.metrics.AllMetrics()) != 0 || h.lateTraces.SpanCount() != 0 {
		t.Fatal("empty input produced output")
	}
}

func TestMillionDistinctKeysStayWithinMaxSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("a million records")
	}
	useFakeClock(t)
	cfg := baseConfig()
	cfg.MaxSeries = 1000
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("id")}}
	h := newConnectorHarness(t, cfg, false)
	const total, perBatch = 1_000_000, 10_000
	for b := 0; b < total/perBatch; b++ {
		td := ptrace.NewTraces()
		sps := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for i := range perBatch {
			sp := sps.AppendEmpty()
			sp.SetEndTimestamp(pcommon.Timestamp(s))
			sp.Attributes().PutInt("id", int64(b*perBatch+i))
		}
		h.sendTraces(td)
	}
	st := lookup(t).Engine.Stats()
	if st.ActiveSeries[0] != 1000 || st.OverflowRecords != total-1000 {
		t.Fatalf("active series %d, overflow records %d; want 1000 and %d", st.ActiveSeries[0], st.OverflowRecords, total-1000)
	}
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 10}))
	var regular, overflow float64
	for _, p := range points(h.metrics.AllMetrics()) {
		if p.attrs == "otel.metric.overflow=true(Bool)" {
			overflow += p.value
		} else {
			regular += p.value
		}
	}
	if regular != 1000 || overflow != total-1000 {
		t.Fatalf("regular %v, overflow %v: every record counted once", regular, overflow)
	}
}

// A span kind outside the enum (OTLP carries any int32) matches no where.span_kind and panics nothing.
func TestSpanKindOutsideTheEnum(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", Where: &WhereConfig{SpanKind: []string{"server"}}}}
	h := newConnectorHarness(t, cfg, false)
	td := traces(spanSpec{service: "a", name: "x", end: 1, kind: ptrace.SpanKindServer})
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty().SetKind(ptrace.SpanKind(-1))
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty().SetKind(ptrace.SpanKind(1 << 20))
	h.sendTraces(td)
	wantCounter(t, h.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "unmatched"}, 2)
}

// A span kind or status code outside the enum, grouped by, gives an empty value, not a panic.
func TestKindAndStatusOutsideTheEnumAsKeys(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("span.kind", "status.code")}}
	h := newConnectorHarness(t, cfg, false)
	td := traces(spanSpec{service: "a", name: "x", end: 1, kind: ptrace.SpanKind(1 << 20)})
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCode(99))
	h.sendTraces(td)
	h.shutdown() // fires the open window
	wantPoint(t, points(h.metrics.AllMetrics()), "n.count", "span.kind=(Str),status.code=(Str)", 0, 10, 1)
}
