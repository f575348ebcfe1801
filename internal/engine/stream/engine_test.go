package stream

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

const sec = int64(time.Second)

// fired is a copy of a Result that outlives Collect.
type fired struct {
	Agg                int
	Key                string
	Overflow, Late     bool
	Start, End         int64 // in seconds
	Count, ValueCount  uint64
	Sum, Avg, Min, Max float64
	WindowValueCount   uint64
	Quantiles          []float64
	HistCount          uint64
}

// windowsOnly passes fn the Results that are firings of a window, leaving out those that carry a
// point alone (see Result.HasWindow): the tests of windows compare firings.
func windowsOnly(fn func(*Result)) func(*Result) {
	return func(r *Result) {
		if r.HasWindow {
			fn(r)
		}
	}
}

func copyResult(r *Result) fired {
	f := fired{Agg: r.Agg, Key: r.Key, Overflow: r.Overflow, Late: r.late, Start: r.Start / sec, End: r.End / sec,
		Count: r.Count, ValueCount: r.ValueCount, Sum: r.Sum, Avg: r.Avg, Min: r.Min, Max: r.Max,
		WindowValueCount: r.WindowValueCount, Quantiles: append([]float64(nil), r.Quantiles...)}
	if r.Hist != nil {
		f.HistCount = r.Hist.Count()
	}
	return f
}

type harness struct {
	t   *testing.T
	e   *Engine
	clk *clock.Fake
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	clk := clock.NewFake(time.Unix(1000, 0))
	cfg.Clock = clk
	if cfg.MaxFutureSkew == 0 {
		cfg.MaxFutureSkew = 5 * time.Minute
	}
	for i := range cfg.Aggregations {
		if cfg.Aggregations[i].MaxSeries == 0 {
			cfg.Aggregations[i].MaxSeries = 100
		}
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, e: e, clk: clk}
}

type rec struct {
	key string
	t   float64 // seconds
	v   float64
}

// batch sends one batch to aggregation 0, naming no source, and returns the verdicts.
func (h *harness) batch(rs ...rec) []Verdict {
	srs := make([]srec, len(rs))
	for i, r := range rs {
		srs[i] = srec{key: r.key, t: r.t, v: r.v}
	}
	return h.sbatch(srs...)
}

func (h *harness) collect() []fired {
	var out []fired
	h.e.Collect(h.clk.Now(), windowsOnly(func(r *Result) { out = append(out, copyResult(r)) }))
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return !a.Late && b.Late
	})
	return out
}

func wantVerdicts(t *testing.T, got []Verdict, want ...Verdict) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("verdicts %v, want %v", got, want)
		}
	}
}

func tumbling10s() Config {
	return Config{Size: 10 * time.Second, Aggregations: []Aggregation{{Quantiles: []float64{0.5}, Histogram: true}}}
}

func TestTumblingWindowFiresWhenWatermarkPassesEnd(t *testing.T) {
	h := newHarness(t, tumbling10s())
	wantVerdicts(t, h.batch(rec{"a", 1, 1}, rec{"a", 2, 3}, rec{"a", 9.5, 5}), OnTime, OnTime, OnTime)
	if got := h.collect(); len(got) != 0 {
		t.Fatalf("fired before the watermark reached the end: %+v", got)
	}
	wantVerdicts(t, h.batch(rec{"a", 10, 7}), OnTime) // W = 10 s: [0,10) ends at 10 and fires
	got := h.collect()
	if len(got) != 1 {
		t.Fatalf("got %d results, want 1: %+v", len(got), got)
	}
	r := got[0]
	// Hand-computed: values 1, 3, 5.
	if r.Start != 0 || r.End != 10 || r.Late || r.Count != 3 || r.Sum != 9 || r.Avg != 3 || r.Min != 1 || r.Max != 5 || r.HistCount != 3 {
		t.Fatalf("window [0,10): %+v", r)
	}
	if math.Abs(r.Quantiles[0]-3)/3 > 0.01 { // nearest rank ceil(0.5*3)-1 = 1: 3
		t.Fatalf("p50 = %v, want 3 within 1%%", r.Quantiles[0])
	}
	h.wantW(10, "after the record at 10 s")
}

func TestOutOfOrdernessHoldsWatermarkBack(t *testing.T) {
	cfg := tumbling10s()
	cfg.MaxOutOfOrderness = 3 * time.Second
	h := newHarness(t, cfg)
	h.batch(rec{"a", 1, 1}, rec{"a", 12, 2}) // W = 9
	if got := h.collect(); len(got) != 0 {
		t.Fatalf("fired at W=9: %+v", got)
	}
	wantVerdicts(t, h.batch(rec{"a", 8, 4}), OnTime) // out of order but on time
	h.batch(rec{"a", 13, 0})                         // W = 10
	got := h.collect()
	if len(got) != 1 || got[0].Count != 2 || got[0].Sum != 5 {
		t.Fatalf("got %+v, want [0,10) with count 2 sum 5", got)
	}
	h.batch(rec{"a", 2, 0})
	h.wantW(10, "an earlier record never moves W back")
}

func TestLatenessLateFiringCarriesDeltasAndCorrectedWhole(t *testing.T) {
	cfg := tumbling10s()
	cfg.AllowedLateness = 5 * time.Second
	h := newHarness(t, cfg)
	h.batch(rec{"a", 1, 10}, rec{"a", 2, 20})
	h.batch(rec{"a", 12, 1}) // W = 12: [0,10) fires
	first := h.collect()
	if len(first) != 1 || first[0].Count != 2 || first[0].Sum != 30 {
		t.Fatalf("first firing %+v", first)
	}
	wantVerdicts(t, h.batch(rec{"a", 3, 40}, rec{"a", 4, 2}), LateUpdate, LateUpdate) // 10 <= 12 < 15
	got := h.collect()
	if len(got) != 1 {
		t.Fatalf("late firing: got %+v", got)
	}
	r := got[0]
	// Deltas: count 2, sum 42, histogram of 2 values. Whole window: 10, 20, 40, 2: avg 18, min 2, max 40.
	if !r.Late || r.Start != 0 || r.End != 10 || r.Count != 2 || r.Sum != 42 || r.ValueCount != 2 || r.HistCount != 2 ||
		r.Avg != 18 || r.Min != 2 || r.Max != 40 || r.WindowValueCount != 4 {
		t.Fatalf("late firing %+v", r)
	}
	// p50 of the whole window {2,10,20,40}: nearest rank ceil(0.5*4)-1 = 1 -> 10.
	if math.Abs(r.Quantiles[0]-10)/10 > 0.01 {
		t.Fatalf("corrected p50 %v, want 10", r.Quantiles[0])
	}
	if got := h.collect(); len(got) != 0 {
		t.Fatalf("a late firing repeated without new records: %+v", got)
	}
	h.batch(rec{"a", 15, 1}) // W = 15 = end + lateness: [0,10) expires
	wantVerdicts(t, h.batch(rec{"a", 5, 1}), Expired)
	for _, r := range h.collect() {
		if r.Start == 0 {
			t.Fatalf("expired window fired again: %+v", r)
		}
	}
}

func TestZeroLatenessExpiresAtEnd(t *testing.T) {
	h := newHarness(t, tumbling10s())
	h.batch(rec{"a", 10, 1})                            // W = 10
	wantVerdicts(t, h.batch(rec{"a", 9.9, 1}), Expired) // its only window ended at 10 <= W
}

func TestSlidingRecordCountsInEveryWindowContainingIt(t *testing.T) {
	cfg := Config{Size: 30 * time.Second, Slide: 10 * time.Second, Aggregations: []Aggregation{{}}}
	h := newHarness(t, cfg)
	h.batch(rec{"a", 25, 2}, rec{"a", 5, 1})
	h.batch(rec{"a", 100, 0}) // fire everything up to 100
	got := h.collect()
	// t=5 is in [-20,10), [-10,20), [0,30); t=25 in [0,30), [10,40), [20,50). Hand-computed counts:
	want := map[int64]uint64{-20: 1, -10: 1, 0: 2, 10: 1, 20: 1}
	if len(got) != len(want) {
		t.Fatalf("got %d windows, want %d: %+v", len(got), len(want), got)
	}
	for _, r := range got {
		if r.End-r.Start != 30 || want[r.Start] != r.Count {
			t.Fatalf("window [%d,%d) count %d, want %d", r.Start, r.End, r.Count, want[r.Start])
		}
	}
}

func TestSlidingLateRecordFiresOnlyUnexpiredWindows(t *testing.T) {
	cfg := Config{Size: 30 * time.Second, Slide: 10 * time.Second, AllowedLateness: 10 * time.Second,
		Aggregations: []Aggregation{{}}}
	h := newHarness(t, cfg)
	h.batch(rec{"a", 25, 0})
	h.batch(rec{"a", 45, 0}) // W = 45: windows ending at 30 and 40 fired; end 30 expires at 40: gone
	h.collect()
	// t=25 is in windows ending 30 (expired), 40 (fired, live until 50) and 50 (not fired).
	wantVerdicts(t, h.batch(rec{"a", 25, 0}), LateUpdate)
	got := h.collect()
	if len(got) != 1 || !got[0].Late || got[0].End != 40 || got[0].Count != 1 {
		t.Fatalf("want one late firing of [10,40) with count 1, got %+v", got)
	}
	h.batch(rec{"a", 50, 0}) // W = 50: window ending 40 expires, window ending 50 fires
	got = h.collect()
	if len(got) != 1 || got[0].End != 50 || got[0].Late || got[0].Count != 3 {
		t.Fatalf("want first firing of [20,50) with count 3 (25, 25, 45), got %+v", got)
	}
}

func TestFutureAndInvalidAreRejectedAndDoNotMoveWatermark(t *testing.T) {
	cfg := tumbling10s()
	cfg.MaxFutureSkew = 5 * time.Second
	h := newHarness(t, cfg) // now = 1000 s
	wantVerdicts(t, h.batch(rec{"a", 1005.5, 1}, rec{"a", 0, 1}, rec{"a", 1005, 1}), Future, Invalid, OnTime)
	h.clk.Advance(10 * time.Second) // past both records: W is no longer held at the clock
	h.wantW(1005, "the future record must not move it")
}

func TestIdleTimeoutAdvancesWatermarkWithWallClock(t *testing.T) {
	cfg := tumbling10s()
	cfg.IdleTimeout = 10 * time.Second
	h := newHarness(t, cfg)
	h.batch(rec{"a", 5, 1}) // accepted at wall 1000 s: W = 5
	h.clk.Advance(9 * time.Second)
	if got := h.collect(); len(got) != 0 || h.e.Watermark() != 5*sec {
		t.Fatalf("advanced before idle_timeout: W=%d %+v", h.e.Watermark(), got)
	}
	h.clk.Advance(2 * time.Second) // 11 s of silence: W = 5 + 11 = 16
	got := h.collect()
	if len(got) != 1 || got[0].End != 10 || h.e.Watermark() != 16*sec {
		t.Fatalf("after 11 s idle: W=%d, %+v", h.e.Watermark(), got)
	}
	h.batch(rec{"a", 12, 1})
	h.wantW(16, "a record below the idle watermark does not move it back")
}

func TestOverflowSeriesPastMaxSeriesAndRelease(t *testing.T) {
	cfg := tumbling10s()
	cfg.Aggregations[0].MaxSeries = 2
	h := newHarness(t, cfg)
	h.batch(rec{"a", 1, 1}, rec{"b", 1, 1}, rec{"c", 1, 1}, rec{"d", 2, 1}, rec{"a", 3, 1})
	if st := h.e.Stats(); st.ActiveSeries[0] != 2 || st.OverflowRecords != 2 || !st.OverflowActive[0] {
		t.Fatalf("stats %+v", st)
	}
	h.batch(rec{"z", 10, 1}) // judged at W=3: a and b still hold their slots, so z overflows too
	got := h.collect()       // W=10: [0,10) fires and (lateness 0) expires, releasing a and b
	want := []fired{{Key: "", Overflow: true, Count: 2}, {Key: "a", Count: 2}, {Key: "b", Count: 1}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Overflow != want[i].Overflow || got[i].Count != want[i].Count {
			t.Fatalf("result %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if st := h.e.Stats(); st.ActiveSeries[0] != 0 || !st.OverflowActive[0] {
		t.Fatalf("after expiry no regular series should be held, the overflow one holds z: %+v", st)
	}
	h.batch(rec{"x", 11, 1})
	if st := h.e.Stats(); st.ActiveSeries[0] != 1 || st.OverflowRecords != 3 {
		t.Fatalf("x should take a released slot: %+v", st)
	}
}

func TestFireAllFiresOpenWindowsAsTheyStand(t *testing.T) {
	h := newHarness(t, tumbling10s())
	h.batch(rec{"a", 1, 1}, rec{"a", 11, 2}, rec{"b", 25, 3})
	var got []fired
	h.e.FireAll(windowsOnly(func(r *Result) { got = append(got, copyResult(r)) }))
	if len(got) != 3 {
		t.Fatalf("FireAll fired %d windows, want 3: %+v", len(got), got)
	}
	if st := h.e.Stats(); st.ActiveSeries[0] != 0 {
		t.Fatalf("series left after FireAll: %+v", st)
	}
}

func TestMissingValueIsCountedButNotAggregated(t *testing.T) {
	h := newHarness(t, tumbling10s())
	h.batch(rec{"a", 1, math.NaN()}, rec{"a", 2, math.Inf(1)}, rec{"a", 3, 4})
	h.batch(rec{"a", 10, 0})
	got := h.collect()
	if len(got) != 1 || got[0].Count != 3 || got[0].ValueCount != 1 || got[0].Sum != 4 || got[0].Min != 4 || got[0].HistCount != 1 {
		t.Fatalf("got %+v", got)
	}
}

// A staged batch hands the max_series slots to the first new series in the order they were staged,
// as one record at a time does, although Apply goes through the records shard by shard.
func TestStagedBatchGivesSeriesSlotsInRecordOrder(t *testing.T) {
	for _, shards := range []int{1, 64} {
		cfg := Config{Size: 10 * time.Second, shards: shards, Aggregations: []Aggregation{{MaxSeries: 3}}}
		h := newHarness(t, cfg)
		b := h.e.Begin(h.clk.Now())
		keys := []string{"k9", "k3", "k7", "k0", "k5", "k3", "k1", "k9"}
		for i, k := range keys {
			if vd := stage(b, 0, []byte(k), 1*sec, float64(i), int32(i)); vd != OnTime {
				t.Fatalf("stage: %v", vd)
			}
		}
		b.Apply(func(tag int32, vd Verdict, _ int64) { t.Errorf("record %d: %v", tag, vd) })
		b.End()
		h.clk.Set(time.Unix(1000, 0))
		b = h.e.Begin(h.clk.Now())
		addOne(b, 0, []byte("k9"), 20*sec, 1) // moves W past the first window
		b.End()
		got := map[string]uint64{}
		for _, f := range h.collect() {
			k := f.Key
			if f.Overflow {
				k = "overflow"
			}
			got[k] += f.Count
		}
		want := map[string]uint64{"k9": 2, "k3": 2, "k7": 1, "overflow": 3}
		if len(got) != len(want) {
			t.Fatalf("shards=%d: firings %v, want %v", shards, got, want)
		}
		for k, n := range want {
			if got[k] != n {
				t.Fatalf("shards=%d: firings %v, want %v", shards, got, want)
			}
		}
	}
}

// stage is StageChecked with the check: it returns Invalid or Future at once for a record that cannot
// be added (counting it, and not staging it), and OnTime when it has staged it.
func stage(b *Batch, agg int, key []byte, t int64, v float64, tag int32) Verdict {
	if vd := b.Check(t); vd != OnTime {
		b.verdicts[agg][vd]++
		return vd
	}
	b.StageChecked(&Record{Agg: agg, Key: key, Time: t, Value: v, Tag: tag})
	return OnTime
}

// addOne stages one record and applies it at once: a record at a time, through the path the component
// takes, with its verdict returned.
func addOne(b *Batch, agg int, key []byte, t int64, v float64) Verdict {
	return addRec(b, &refRec{agg: agg, t: t, v: v}, key)
}

// addRec is addOne for record r, of its weight, with its key in key.
func addRec(b *Batch, r *refRec, key []byte) Verdict {
	if vd := stageRec(b, r, key, 0); vd != OnTime {
		return vd
	}
	vd := OnTime
	b.Apply(func(_ int32, got Verdict, _ int64) { vd = got })
	return vd
}

// stageRec is Batch.stage for record r, of its weight, with its key in key (which staging copies).
func stageRec(b *Batch, r *refRec, key []byte, tag int32) Verdict {
	if vd := b.Check(r.t); vd != OnTime {
		b.verdicts[r.agg][vd]++
		return vd
	}
	if r.dist != nil {
		b.StageDistribution(&Record{Agg: r.agg, Key: key, Time: r.t, Tag: tag, IDs: r.ids()}, distOf(&b.e.aggs[r.agg], r))
		return OnTime
	}
	b.StageChecked(&Record{Agg: r.agg, Key: key, Time: r.t, Value: r.v, Tag: tag, Weight: r.w, IDs: r.ids()})
	return OnTime
}

// distOf makes the Distribution of a distribution record r for aggregation a, as the metrics input
// makes one of a histogram data point: its count, sum and (unless r.noMinMax) min and max; its values
// counted in a's explicit buckets; and, when a keeps a sketch, a sketch of them exported as an
// OpenTelemetry exponential histogram and imported with SetExponential.
func distOf(a *Aggregation, r *refRec) *Distribution {
	d := &Distribution{Count: uint64(len(r.dist)), HasMinMax: !r.noMinMax, Min: math.Inf(1), Max: math.Inf(-1)}
	for _, v := range r.dist {
		d.Sum += v
		d.Min, d.Max = min(d.Min, v), max(d.Max, v)
	}
	if a.Bounds != nil {
		d.Buckets = make([]uint64, a.buckets())
		for _, v := range r.dist {
			d.Buckets[bucketOf(a.Bounds, v)]++
		}
	}
	if a.KeepsSketch() {
		src := newSketch()
		for _, v := range r.dist {
			src.Insert(v)
		}
		s := src.Scale()
		posOff, pos := src.AppendPositiveCountsAt(nil, s)
		negOff, neg := src.AppendNegativeCountsAt(nil, s)
		d.Sketch = newSketch()
		d.Sketch.SetExponential(s, src.ZeroCount(), posOff, pos, negOff, neg, d.Sum, d.Min, d.Max, d.HasMinMax)
	}
	return d
}
