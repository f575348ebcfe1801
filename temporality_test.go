package windowaggregator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The output modes through the factories, on streams worked out by hand from the contract.

// outputModesConfig is a 10 s tumbling window, allowed_lateness 30 s, group_by service.name, with
// count, sum, avg and an explicit histogram (6 ms, 25 ms) of span durations.
func outputModesConfig(temporality Temporality, late LateFirings) *Config {
	cfg := baseConfig()
	cfg.AllowedLateness = 30 * time.Second
	cfg.Temporality, cfg.LateFirings = temporality, late
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", GroupBy: keys("service.name"),
		Outputs:   []string{"count", "sum", "avg", "histogram"},
		Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{"6ms", "25ms"}}}}}
	return cfg
}

type cumulativeWant struct {
	end     int64
	count   float64
	sum     float64
	buckets []uint64
}

// Cumulative: a constant start, a point at every window end while the series lives (with or without
// data), a late record in the next point, no point twice, and the last equal to the true total.
func TestCumulativeOutputRunsTotalsWithOneStart(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, outputModesConfig(temporalityCumulative, lateFold), true)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 1, ms: 10}, spanSpec{service: "a", name: "x", end: 2, ms: 20},
		spanSpec{service: "a", name: "x", end: 3, ms: 30}, spanSpec{service: "b", name: "x", end: 4, ms: 3}))
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 11, ms: 5}, spanSpec{service: "b", name: "x", end: 12, ms: 40})) // W = 12
	// a@5 is late for [0,10), within allowed_lateness: it goes into a's next point, at 20.
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 5, ms: 7}, spanSpec{service: "a", name: "x", end: 21, ms: 1})) // W = 21
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 45, ms: 2}))                                                   // W = 45: ends 30 and 40
	// b@8 comes after [0,10) expired (10 + 30 <= 45): late data, in no total.
	h.sendTraces(traces(spanSpec{service: "b", name: "x", end: 8, ms: 1}))
	if n := h.lateTraces.SpanCount(); n != 1 {
		t.Fatalf("%d spans routed late, want 1 (b@8)", n)
	}
	h.shutdown() // no storage: a's open window [40,50) fires as it stands
	ps := points(h.metrics.AllMetrics())

	// a: 10, 20, 30 | 5, 7 | 1 | - | 2 ms; b: 3 | 40 | - | -.
	want := map[string][]cumulativeWant{
		"a": {{10, 3, 60, []uint64{0, 2, 1}}, {20, 5, 72, []uint64{1, 3, 1}}, {30, 6, 73, []uint64{2, 3, 1}},
			{40, 6, 73, []uint64{2, 3, 1}}, {50, 7, 75, []uint64{3, 3, 1}}},
		"b": {{10, 1, 3, []uint64{1, 0, 0}}, {20, 2, 43, []uint64{1, 0, 1}}, {30, 2, 43, []uint64{1, 0, 1}},
			{40, 2, 43, []uint64{1, 0, 1}}},
	}
	for svc, ws := range want {
		attrs := "service.name=" + svc + "(Str)"
		for _, m := range []string{"lat.count", "lat.sum", "lat.histogram"} {
			got := find(ps, m, attrs)
			if len(got) != len(ws) {
				t.Fatalf("%s %s: %d points, want %d: %+v", svc, m, len(got), len(ws), got)
			}
			for i, w := range ws {
				g := got[i]
				v := map[string]float64{"lat.count": w.count, "lat.sum": w.sum, "lat.histogram": w.count}[m]
				if g.start != 0 || g.end != w.end || g.value != v || g.temporality != pmetric.AggregationTemporalityCumulative {
					t.Errorf("%s %s point %d: [%d, %d] = %v (%v), want [0, %d] = %v cumulative", svc, m, i, g.start, g.end, g.value, g.temporality, w.end, v)
				}
				if m == "lat.histogram" && (!slices.Equal(g.buckets, w.buckets) || g.sum != w.sum) {
					t.Errorf("%s histogram at %d: buckets %v sum %v, want %v %v", svc, w.end, g.buckets, g.sum, w.buckets, w.sum)
				}
				if m != "lat.histogram" && !g.monotonic {
					t.Errorf("%s %s: not monotonic", svc, m)
				}
			}
		}
	}
	// Gauges: one per window with data, never again for a window (the late a@5 re-emits nothing).
	var avgEnds []int64
	for _, p := range find(ps, "lat.avg", "service.name=a(Str)") {
		avgEnds = append(avgEnds, p.end)
	}
	if !slices.Equal(avgEnds, []int64{10, 20, 30, 50}) {
		t.Errorf("a's avg at window ends %v, want 10, 20, 30, 50", avgEnds)
	}
	wantPoint(t, ps, "lat.avg", "service.name=a(Str)", 0, 10, 20)
}

// A cumulative series without records for series_expiration of event time ends; records after that
// start it anew, with a new start.
func TestCumulativeSeriesExpires(t *testing.T) {
	useFakeClock(t)
	cfg := outputModesConfig(temporalityCumulative, lateFold)
	cfg.AllowedLateness = 0
	cfg.SeriesExpiration = 20 * time.Second
	h := newConnectorHarness(t, cfg, true)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 1, ms: 10}))
	for at := 11.0; at <= 61; at += 10 {
		h.sendTraces(traces(spanSpec{service: "b", name: "x", end: at, ms: 10})) // b keeps W moving
	}
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 62, ms: 10}, spanSpec{service: "b", name: "x", end: 71, ms: 10}))
	ps := points(h.metrics.AllMetrics())
	var got []string
	for _, p := range find(ps, "lat.count", "service.name=a(Str)") {
		got = append(got, fmt.Sprintf("[%d,%d]=%v", p.start, p.end, p.value))
	}
	// Its data ended at 10: points at 10 and 20, none from 30 (10 + 20 s); a@62 starts again at 60.
	if want := []string{"[0,10]=1", "[0,20]=1", "[60,70]=1"}; !slices.Equal(got, want) {
		t.Fatalf("a's count points %v, want %v", got, want)
	}
}

// Delta with sliding windows: each point is one slide, so points never overlap nor share a
// timestamp, and they add up to the true total; a late record goes into the next point.
func TestDeltaOutputOfSlidingWindowsIsOneSlidePerPoint(t *testing.T) {
	useFakeClock(t)
	cfg := outputModesConfig(temporalityDelta, lateFold)
	cfg.Window.Size, cfg.Window.Slide = 20*time.Second, 10*time.Second
	cfg.Aggregations[0].Outputs = []string{"count", "max"}
	cfg.Aggregations[0].Histogram = nil
	h := newConnectorHarness(t, cfg, true)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 5, ms: 1}, spanSpec{service: "a", name: "x", end: 15, ms: 3})) // W = 15
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 25, ms: 2}))                                                   // W = 25
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 7, ms: 9}, spanSpec{service: "a", name: "x", end: 45, ms: 4})) // a@7 late; W = 45
	h.shutdown()
	ps := points(h.metrics.AllMetrics())
	counts := find(ps, "lat.count", "service.name=a(Str)")
	var got []string
	var total float64
	for i, p := range counts {
		got = append(got, fmt.Sprintf("[%d,%d)=%v", p.start, p.end, p.value))
		total += p.value
		if p.end-p.start != 10 || (i > 0 && p.start < counts[i-1].end) || p.temporality != pmetric.AggregationTemporalityDelta {
			t.Errorf("point %d [%d, %d): not one slide after the last (%v)", i, p.start, p.end, p.temporality)
		}
	}
	// [0,10) a@5; [10,20) a@15; [20,30) a@25 and the late a@7; [30,40) nothing (window [20,40) fires);
	// at shutdown [40,50) a@45 and [50,60) nothing.
	if want := []string{"[0,10)=1", "[10,20)=1", "[20,30)=2", "[30,40)=0", "[40,50)=1", "[50,60)=0"}; !slices.Equal(got, want) {
		t.Fatalf("count points %v, want %v", got, want)
	}
	if total != 5 {
		t.Fatalf("delta points add up to %v, want the 5 spans", total)
	}
	// The gauges stay of whole windows: max of [0,20) is 3 ms; [-10,10) never sees the late a@7 again.
	wantPoint(t, ps, "lat.max", "service.name=a(Str)", 0, 20, 3)
	wantPoint(t, ps, "lat.max", "service.name=a(Str)", -10, 10, 1)
}

// A restart with storage continues each cumulative series with the same start: Prometheus sees no
// reset.
func TestCumulativeSeriesContinuesAcrossRestart(t *testing.T) {
	useFakeClock(t)
	cfg := outputModesConfig(temporalityCumulative, lateFold)
	st := &memStorage{data: map[string][]byte{}}
	ps1, _ := runConfigWithStorage(t, cfg, st, []spanSpec{{service: "a", name: "x", end: 1, ms: 10},
		{service: "a", name: "x", end: 2, ms: 10}}, []spanSpec{{service: "a", name: "x", end: 11, ms: 30}})
	ps2, _ := runConfigWithStorage(t, cfg, st, []spanSpec{{service: "a", name: "x", end: 21, ms: 1}})
	var got []string
	for _, p := range append(find(ps1, "lat.count", "service.name=a(Str)"), find(ps2, "lat.count", "service.name=a(Str)")...) {
		got = append(got, fmt.Sprintf("[%d,%d]=%v", p.start, p.end, p.value))
	}
	// Before: [0,10) fired with 2. After: [10,20) adds a@11; [20,30) is still open at the second
	// shutdown, saved, not fired.
	if want := []string{"[0,10]=2", "[0,20]=3"}; !slices.Equal(got, want) {
		t.Fatalf("count points across the restart %v, want %v", got, want)
	}
}
