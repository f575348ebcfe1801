package stream

import (
	"slices"
	"testing"
	"time"
)

// The windows an operator reads, worked out by hand. Tumbling 10 s windows, 10 s allowed lateness,
// the clock at 1030 s. Records at 1001 (key a), 1012 (b), 1025 (c) and 1027 (a): W = 1027.
// [1000,1010) expired at W 1020; [1010,1020) fired, takes late records until W 1030; [1020,1030)
// fires at W 1030. Sliding 10 s windows every 5 s, one record at 1012, W 1012: the pane [1010,1015)
// is in [1005,1015) and [1010,1020), neither fired.
func TestOpenWindowsAsAnOperatorReadsThem(t *testing.T) {
	cfg := tumbling10s()
	cfg.AllowedLateness = 10 * time.Second
	h := newHarness(t, cfg)
	h.at(1030)
	h.batch(rec{"a", 1001, 1}, rec{"b", 1012, 1}, rec{"c", 1025, 1}, rec{"a", 1027, 1})
	h.wantW(1027, "the greatest record")
	s := func(x float64) int64 { return int64(x * float64(sec)) }
	got, total, byAgg := h.e.OpenWindows(10)
	want := []WindowView{{s(1010), s(1020), true}, {s(1020), s(1030), false}}
	if total != 2 || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("OpenWindows = %+v of %d, want %+v", got, total, want)
	}
	if got, total, _ := h.e.OpenWindows(1); total != 2 || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("OpenWindows limited to 1 = %+v of %d, want the first of 2", got, total)
	}
	if len(byAgg) != 1 || byAgg[0] != 2 {
		t.Fatalf("OpenWindows by aggregation = %v, want the one aggregation's 2 (and none for one that does not exist)", byAgg)
	}

	cfg = tumbling10s()
	cfg.Slide = 5 * time.Second
	h = newHarness(t, cfg)
	h.at(1030)
	h.batch(rec{"a", 1012, 1})
	got, total, _ = h.e.OpenWindows(10)
	want = []WindowView{{s(1005), s(1015), false}, {s(1010), s(1020), false}}
	if total != 2 || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("sliding: OpenWindows = %+v of %d, want %+v", got, total, want)
	}
}

// Verdicts by aggregation, worked out by hand: tumbling 10 s windows, 5 s allowed lateness, clock at
// 1030 s. The first batch, all on time: aggregation 0 at 1012 and 1022, aggregation 1 at 1018; W =
// 1022. The second: 0 at 1015 ([1010,1020) fired, kept until W 1025: a late update); 1 at 1005
// ([1000,1010) expired at W 1015) and 1021 (on time). Aggregation 0: 2 on time, 1 late update;
// aggregation 1: 2 on time, 1 expired.
func TestVerdictsByAggregation(t *testing.T) {
	cfg := tumbling10s()
	cfg.AllowedLateness = 5 * time.Second
	cfg.Aggregations = append(cfg.Aggregations, Aggregation{})
	h := newHarness(t, cfg)
	h.at(1030)
	h.sbatch(srec{"", 0, "k", 1012, 1}, srec{"", 0, "k", 1022, 1}, srec{"", 1, "k", 1018, 1})
	h.wantW(1022, "after the first batch")
	wantVerdicts(t, h.sbatch(srec{"", 0, "k", 1015, 1}, srec{"", 1, "k", 1005, 1}, srec{"", 1, "k", 1021, 1}), LateUpdate, Expired, OnTime)
	for agg, want := range [][3]uint64{{2, 1, 0}, {2, 0, 1}} {
		if on, late, exp := h.e.Verdicts(agg); [3]uint64{on, late, exp} != want {
			t.Errorf("aggregation %d: on time %d, late updates %d, expired %d; want %v", agg, on, late, exp, want)
		}
	}
	if on, late, exp := h.e.Verdicts(2); on+late+exp != 0 {
		t.Errorf("an aggregation that does not exist has verdicts")
	}
}

// The series with the most records in the last window W has closed, worked out by hand: tumbling
// 10 s windows, clock at 1030 s. Key a: 3 records in [1010,1020), one in [1020,1030); b: 1 in
// [1010,1020), weight 5 (counts 5); c: 2 in [1010,1020); d: one in [1000,1010) only; e one in
// [1020,1030). W = 1025. With 10 s allowed lateness the last window closed, [1010,1020), is kept:
// b 5, a 3, c 2; d none. Without, it has expired: the next to fire, [1020,1030): a 1, e 1.
func TestTopSeriesOfTheLastWindow(t *testing.T) {
	cfg := tumbling10s()
	cfg.AllowedLateness = 10 * time.Second
	top, end := topSeriesOf(t, cfg)
	want := []SeriesCount{{"b", 5, false}, {"a", 3, false}, {"c", 2, false}}
	if end != int64(1020*float64(sec)) || !slices.Equal(top, want) {
		t.Fatalf("with lateness: TopSeries = %v, window end %d; want %v, 1020 s", top, end, want)
	}
	top, end = topSeriesOf(t, tumbling10s())
	want = []SeriesCount{{"a", 1, false}, {"e", 1, false}}
	if end != int64(1030*float64(sec)) || !slices.Equal(top, want) {
		t.Fatalf("without lateness: TopSeries = %v, window end %d; want %v, 1030 s", top, end, want)
	}
}

// topSeriesOf feeds TestTopSeriesOfTheLastWindow's records to an engine of cfg and returns its top
// series.
func topSeriesOf(t *testing.T, cfg Config) ([]SeriesCount, int64) {
	h := newHarness(t, cfg)
	h.at(1030)
	h.wbatch(wrec{"a", 1011, 1, 1}, wrec{"a", 1012, 1, 1}, wrec{"a", 1019, 1, 1}, wrec{"a", 1021, 1, 1}, wrec{"b", 1015, 1, 5},
		wrec{"c", 1013, 1, 1}, wrec{"c", 1014, 1, 1}, wrec{"d", 1005, 1, 1}, wrec{"e", 1025, 1, 1})
	h.wantW(1025, "the greatest record")
	if top, _ := h.e.TopSeries(0, 1); len(top) != 1 {
		t.Fatalf("TopSeries(1) = %v, want one", top)
	}
	return h.e.TopSeries(0, 10)
}

// One series' windows, worked out by hand: sliding 10 s windows every 5 s, 30 s allowed lateness,
// clock at 1030 s. Key a: values 1 at 1001 and 2 at 1007 (weight 3), 4 at 1012; key b elsewhere. W =
// 1012: a's panes [1000,1005) {1}, [1005,1010) {2×3}, [1010,1015) {4} are in the windows
// [995,1005) 1 record, sum 1; [1000,1010) 4, 7; [1005,1015) 4, 10; [1010,1020) 1, 4. The first two
// have fired. A key nobody sent is not found.
func TestFindSeries(t *testing.T) {
	cfg := tumbling10s()
	cfg.Slide = 5 * time.Second
	cfg.AllowedLateness = 30 * time.Second
	h := newHarness(t, cfg)
	h.at(1030)
	h.wbatch(wrec{"a", 1001, 1, 1}, wrec{"a", 1007, 2, 3}, wrec{"a", 1012, 4, 1}, wrec{"b", 1003, 9, 1})
	h.wantW(1012, "the greatest record")
	s := func(x float64) int64 { return int64(x * float64(sec)) }
	key, got, found := h.e.FindSeries(0, func(k string) bool { return k == "a" })
	want := []SeriesWindow{
		{WindowView{s(995), s(1005), true}, 1, 1}, {WindowView{s(1000), s(1010), true}, 4, 7},
		{WindowView{s(1005), s(1015), false}, 4, 10}, {WindowView{s(1010), s(1020), false}, 1, 4},
	}
	if !found || key != "a" || !slices.Equal(got, want) {
		t.Fatalf("FindSeries(a) = %q, %+v, %v; want a, %+v", key, got, found, want)
	}
	if _, got, found := h.e.FindSeries(0, func(k string) bool { return k == "z" }); found || got != nil {
		t.Fatalf("FindSeries(z) = %+v, %v; want nothing", got, found)
	}
}

// wrec is a record of aggregation 0 with its weight.
type wrec struct {
	key  string
	t, v float64 // seconds; value
	n    uint32  // weight
}

// wbatch stages one batch of weighted records of aggregation 0, each taken as on time (unjudged).
func (h *harness) wbatch(rs ...wrec) {
	b := h.e.Begin(h.clk.Now())
	for _, r := range rs {
		b.StageChecked(&Record{Key: []byte(r.key), Time: int64(r.t * float64(sec)), Value: r.v, Weight: r.n})
	}
	b.Apply(func(int32, Verdict, int64) {})
	b.End()
}
