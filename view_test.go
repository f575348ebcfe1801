package windowaggregator

import (
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/view"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Records by outcome per aggregation, as the operator's view reads them, worked out by hand. Two
// aggregations of spans: "all", and "servers" (span_kind server); 10 s windows, 5 s allowed
// lateness, the connector with a late pipeline (late records routed).
//   - Batch 1 (judged against no W): server span 1 at 1 s, client span 2 at 2 s. all: 2 on time;
//     servers: 1 on time, 1 unmatched.
//   - Batch 2: span 1 again, a duplicate found at "all", the first aggregation that selects it
//     (servers never sees it); client span 3 at 16 s, on time for all, unmatched for servers; W 16.
//   - Batch 3: server span 4 at 3 s: [0,10) expired at W 15, for both: routed.
//
// all: 3 on time, 1 routed, 1 duplicate, 0 unmatched; servers: 1 on time, 1 routed, 0 duplicates,
// 2 unmatched. The component routed one record (span 4, late for both). Its one open window is
// [10,20) (span 3; [0,10) has expired), not fired at W 16: at the fake clock's 1000 s it is
// 1000 - (20 + 0 of max_out_of_orderness + 10 of slide) = 970 s overdue. Units: count's {span}.
func TestViewCountsRecordsByAggregation(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.AllowedLateness = 5 * time.Second
	cfg.Aggregations = []AggregationConfig{
		{Name: "all", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count"}},
		{Name: "servers", Signal: "spans", Where: &WhereConfig{SpanKind: []string{"server"}}, GroupBy: keys("service.name"), Outputs: []string{"count"}},
	}
	h := newConnectorHarness(t, cfg, true)
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 1, id: 1, kind: ptrace.SpanKindServer}, spanSpec{service: "a", end: 2, ms: 1, id: 2, kind: ptrace.SpanKindClient}))
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 1, id: 1, kind: ptrace.SpanKindServer}, spanSpec{service: "a", end: 16, ms: 1, id: 3, kind: ptrace.SpanKindClient}))
	h.sendTraces(traces(spanSpec{service: "a", end: 3, ms: 1, id: 4, kind: ptrace.SpanKindServer}))
	v := viewOf(t)
	got := v.Aggregations
	if v.LateRecords != (view.LateCounts{Routed: 1}) {
		t.Errorf("the component's late records %+v, want 1 routed", v.LateRecords)
	}
	if v.OpenWindows != 1 || v.OverdueWindows != 1 || len(v.Windows) != 1 || v.Windows[0].Start.Unix() != 10 || v.Windows[0].End.Unix() != 20 || v.Windows[0].Fired ||
		v.Windows[0].OverdueSeconds == nil || *v.Windows[0].OverdueSeconds != 970 {
		t.Errorf("the component's windows: %d %+v, want [10,20) open, 970 s overdue", v.OpenWindows, v.Windows)
	}
	want := []view.RecordCounts{{OnTime: 3, LateRouted: 1, Duplicate: 1}, {OnTime: 1, LateRouted: 1, Unmatched: 2}}
	if len(got) != 2 {
		t.Fatalf("aggregations %+v", got)
	}
	for i, w := range want {
		if got[i].Records != w {
			t.Errorf("%s: %+v, want %+v", got[i].Name, got[i].Records, w)
		}
		if got[i].OpenWindows != 1-i || got[i].OutputUnits["count"] != "{span}" || len(got[i].OutputUnits) != 1 {
			t.Errorf("%s: %d open windows, output units %v; want %d, count in {span}", got[i].Name, got[i].OpenWindows, got[i].OutputUnits, 1-i)
		}
	}
	// The history's reading has the same counts, and W 16 s, 1000 s - 16 s behind the fake clock.
	var sample *view.ComponentSample
	for _, s := range view.Samples() {
		if s.ID == lookup(t).id.String() {
			sample = &s
		}
	}
	if sample == nil || len(sample.Records) != 2 || sample.Records["all"] != want[0] || sample.Records["servers"] != want[1] || sample.LateRecords.Routed != 1 ||
		sample.Watermark == nil || sample.Watermark.Unix() != 16 || *sample.WatermarkLagSeconds != 984 {
		t.Errorf("sample %+v", sample)
	}
}

// The explainer keeps the values of a series once asked about it while it is held, worked out by
// hand. 10 s windows, no lateness, no out-of-orderness: W is the greatest end seen.
//   - Asked about service a before any record: not seen, nothing kept (a series not held is not).
//   - a: 5 ms at 1 s, 7 ms at 2 s; b: 100 ms at 3 s. Asked: [0,10) holds a's 2 records; kept from
//     now on.
//   - a: 1 ms at 12 s, W 12 fires [0,10): a's 2 records, sum 12, avg 6, min 5, max 7 (b's window is
//     not a's).
//   - c: 4 ms at 25 s, W 25 fires [10,20): a's 1 record, sum 1. a holds no window now: its last
//     values are both windows, and why says they fired.
func TestExplainKeepsTheLastValues(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Watermark.MaxOutOfOrderness = 0
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count", "sum", "min", "max"}}}
	h := newConnectorHarness(t, cfg, false)
	id := lookup(t).id.String()
	a := map[string]string{"service.name": "a"}
	ex, err := view.Explain(id, "lat", a)
	if err != nil || ex.Found || len(ex.LastValues) != 0 || ex.LastValuesSince != nil || !strings.HasPrefix(ex.Why, "not seen") {
		t.Fatalf("before any record: %+v %v", ex, err)
	}
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 5, id: 1}, spanSpec{service: "a", end: 2, ms: 7, id: 2}, spanSpec{service: "b", end: 3, ms: 100, id: 3}))
	ex, err = view.Explain(id, "lat", a)
	at := func(s float64) time.Time { return time.Unix(0, int64(s*1e9)).UTC() }
	if err != nil || !ex.Found || len(ex.Windows) != 1 || ex.Windows[0].Records != 2 || ex.Windows[0].Sum != 12 || len(ex.LastValues) != 0 ||
		ex.LastValuesSince == nil {
		t.Fatalf("[0,10) open: %+v %v", ex, err)
	}
	h.sendTraces(traces(spanSpec{service: "a", end: 12, ms: 1, id: 4}))
	ex, err = view.Explain(id, "lat", a)
	if err != nil || !ex.Found || len(ex.Windows) != 1 || !ex.Windows[0].End.Equal(at(20)) || ex.Windows[0].Records != 1 || len(ex.LastValues) != 1 {
		t.Fatalf("after [0,10) fired: %+v %v", ex, err)
	}
	first := ex.LastValues[0]
	if !first.Start.Equal(at(0)) || !first.End.Equal(at(10)) || first.Records != 2 || first.Sum != 12 || first.Avg == nil || *first.Avg != 6 ||
		*first.Min != 5 || *first.Max != 7 || first.LateFirings != 0 {
		t.Errorf("[0,10) of a: %+v", first)
	}
	h.sendTraces(traces(spanSpec{service: "c", end: 25, ms: 4, id: 5}))
	ex, err = view.Explain(id, "lat", a)
	if err != nil || ex.Found || len(ex.Windows) != 0 || len(ex.LastValues) != 2 || !strings.HasPrefix(ex.Why, "fired") {
		t.Fatalf("after [10,20) fired: %+v %v", ex, err)
	}
	if second := ex.LastValues[1]; !second.End.Equal(at(20)) || second.Records != 1 || second.Sum != 1 || *second.Max != 1 {
		t.Errorf("[10,20) of a: %+v", second)
	}
	if _, err := view.Explain(id, "lat", map[string]string{"route": "x"}); err == nil {
		t.Error("a key the aggregation does not group by is not refused")
	}
}

// The view's figures against the component's self-telemetry and against numbers worked out by
// hand. One aggregation of server spans, so that component-wide counters are its own; 10 s windows,
// 5 s allowed lateness, late records routed.
//   - Batch 1 (no W yet): server span 1 at 1 s, on time; client span 2 at 2 s, unmatched.
//   - Batch 2: span 1 again, a duplicate; server span 3 at 16 s, on time; W 16.
//   - Batch 3: server span 4 at 3 s: [0,10) expired at W 15, routed; server span 5 at 12 s, on time.
//   - Batch 4: server span 6 at 21 s, on time; W 21 fires [10,20), kept until W 25.
//   - Batch 5: server span 7 at 14 s: a late update of [10,20).
//
// On time 4, late accepted 1, late routed 1, duplicate 1, unmatched 1; series 1; W 21 s with the
// fake clock at 1000 s: lag 979 s.
func TestViewAgreesWithSelfTelemetry(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.AllowedLateness = 5 * time.Second
	cfg.Watermark.MaxOutOfOrderness = 0
	cfg.Aggregations = []AggregationConfig{{Name: "servers", Signal: "spans", Where: &WhereConfig{SpanKind: []string{"server"}},
		GroupBy: keys("service.name"), Outputs: []string{"count"}}}
	h := newConnectorHarness(t, cfg, true)
	server := ptrace.SpanKindServer
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 1, id: 1, kind: server}, spanSpec{service: "a", end: 2, ms: 1, id: 2, kind: ptrace.SpanKindClient}))
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 1, id: 1, kind: server}, spanSpec{service: "a", end: 16, ms: 1, id: 3, kind: server}))
	h.sendTraces(traces(spanSpec{service: "a", end: 3, ms: 1, id: 4, kind: server}, spanSpec{service: "a", end: 12, ms: 1, id: 5, kind: server}))
	h.sendTraces(traces(spanSpec{service: "a", end: 21, ms: 1, id: 6, kind: server}))
	h.sendTraces(traces(spanSpec{service: "a", end: 14, ms: 1, id: 7, kind: server}))

	v := viewOf(t)
	a := v.Aggregations[0]
	want := view.RecordCounts{OnTime: 4, LateAccepted: 1, LateRouted: 1, Duplicate: 1, Unmatched: 1}
	if a.Records != want || a.Series != 1 || v.WatermarkLagSeconds == nil || *v.WatermarkLagSeconds != 979 {
		t.Errorf("view: records %+v, series %d, lag %v; want %+v, 1, 979 s", a.Records, a.Series, v.WatermarkLagSeconds, want)
	}
	tel := h.tel
	for _, c := range []struct {
		what      string
		view      int64
		telemetry int64
	}{
		{"on time", int64(a.Records.OnTime), counterIncluding(t, tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"})},
		{"late accepted", int64(a.Records.LateAccepted), counterIncluding(t, tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "late_updated"})},
		{"late routed", a.Records.LateRouted, counterIncluding(t, tel, "otelcol_window_aggregator_late_records", map[string]string{"action": "routed"})},
		{"late dropped", a.Records.LateDropped, counterIncluding(t, tel, "otelcol_window_aggregator_late_records", map[string]string{"action": "dropped"})},
		{"duplicate", a.Records.Duplicate, counterIncluding(t, tel, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "spans"})},
		{"unmatched", a.Records.Unmatched, counterIncluding(t, tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "unmatched"})},
	} {
		if c.view != c.telemetry {
			t.Errorf("%s: the view says %d, the self-telemetry %d", c.what, c.view, c.telemetry)
		}
	}
	if series, ok := gaugeValue(t, tel, "otelcol_window_aggregator_active_series", "aggregation", "servers"); !ok || int64(series) != a.Series {
		t.Errorf("series: the view says %d, active_series %v (%v)", a.Series, series, ok)
	}
	if lag, ok := gaugeValue(t, tel, "otelcol_window_aggregator_watermark_lag", "", ""); !ok || lag != *v.WatermarkLagSeconds {
		t.Errorf("lag: the view says %v, watermark_lag %v (%v)", *v.WatermarkLagSeconds, lag, ok)
	}
}

// The overflow series is listed among the top series as the overflow series, not as a series that
// lacked every group_by key. max_series 1: a at 1 s takes the one series, b at 2 s and 3 s go to
// the overflow series. W 3 has closed no window: the next to fire, [0,10), overflow 2, a 1.
func TestTopSeriesMarksTheOverflowSeries(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.MaxSeries = 1
	cfg.Watermark.MaxOutOfOrderness = 0
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count"}}}
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(spanSpec{service: "a", end: 1, ms: 1, id: 1}, spanSpec{service: "b", end: 2, ms: 1, id: 2}, spanSpec{service: "b", end: 3, ms: 1, id: 3}))
	a := viewOf(t).Aggregations[0]
	if len(a.TopSeries) != 2 || !a.TopSeries[0].Overflow || a.TopSeries[0].Records != 2 || a.TopSeries[1].Overflow ||
		a.TopSeries[1].Series["service.name"] != "a" || a.TopSeries[1].Records != 1 || a.LastWindowFired || a.LastWindowEnd == nil ||
		a.LastWindowEnd.Unix() != 10 {
		t.Errorf("top series %+v of the window ending %v (fired %v); want the overflow series 2, a 1, of [0,10) not fired", a.TopSeries, a.LastWindowEnd, a.LastWindowFired)
	}
}
