package stream

import (
	"cmp"
	"math"
	"os"
	"slices"
	"testing"
	"time"
)

// accRec is a record for the accumulator tests: key, time in seconds, value, weight (0: 1) and
// identifier (0: none).
type accRec struct {
	key string
	t   float64
	v   float64
	w   uint32
	id  uint64
}

// accFirings sends each batch in turn at wall time now (seconds), then collects at the end, and
// returns the firings' Values by window start (seconds), one series.
func accRun(t *testing.T, cfg Config, now float64, batches ...[]accRec) map[int64][]float64 {
	t.Helper()
	h := newHarness(t, cfg)
	h.clk.Set(time.Unix(0, int64(now*1e9)))
	out := map[int64][]float64{}
	collect := func() {
		h.e.Collect(h.clk.Now(), windowsOnly(func(r *Result) {
			out[r.Start/sec] = append([]float64(nil), r.Values...)
		}))
	}
	for _, rs := range batches {
		b := h.e.Begin(h.clk.Now())
		for i, r := range rs {
			tn := int64(r.t * 1e9)
			if b.Check(tn) != OnTime {
				t.Fatalf("record %v not on time", r)
			}
			var ids []uint64
			if r.id != 0 {
				ids = []uint64{r.id}
			}
			b.StageChecked(&Record{Key: []byte(r.key), Time: tn, Value: r.v, Weight: r.w, Tag: int32(i), IDs: ids})
		}
		b.Apply(func(int32, Verdict, int64) {})
		b.End()
		collect()
	}
	h.e.FireAll(windowsOnly(func(r *Result) { out[r.Start/sec] = append([]float64(nil), r.Values...) }))
	return out
}

func spreadConfig(size, slide time.Duration) Config {
	return Config{Size: size, Slide: slide, AllowedLateness: time.Minute,
		Aggregations: []Aggregation{{Accumulators: []AccumulatorKind{SpreadKind, DistinctKind(0)}}}}
}

// TestSpreadOfTheTextbookExample: 2, 4, 4, 4, 5, 5, 7, 9 have mean 5 and population variance 4;
// five distinct values.
func TestSpreadOfTheTextbookExample(t *testing.T) {
	var rs []accRec
	for i, v := range []float64{2, 4, 4, 4, 5, 5, 7, 9} {
		rs = append(rs, accRec{t: 1 + float64(i), v: v, id: uint64(v)}) // ids: the values themselves
	}
	got := accRun(t, spreadConfig(10*time.Second, 0), 100, rs)
	if v := got[0]; len(v) != 2 || v[0] != 4 || v[1] != 5 {
		t.Fatalf("window [0, 10s): values %v, want stdvar 4 and 5 distinct", v)
	}
}

// TestSpreadWeightsAreMultiplicity: 2 of weight 3 and 6 of weight 1 are 2, 2, 2, 6: mean 3, variance
// (3·1 + 9)/4 = 3. A weight does not multiply a distinct value.
func TestSpreadWeightsAreMultiplicity(t *testing.T) {
	got := accRun(t, spreadConfig(10*time.Second, 0), 100, []accRec{{t: 1, v: 2, w: 3, id: 7}, {t: 2, v: 6, id: 8}})
	if v := got[0]; v[0] != 3 || v[1] != 2 {
		t.Fatalf("values %v, want stdvar 3 and 2 distinct", v)
	}
}

// TestSpreadOfLargeOffset: 10^6 ± 1, alternating, over a sliding window whose panes are merged:
// within 1e-6 of a two-pass computation, which a running sum of squares is not (it loses the
// variance of 1 to the cancellation of two sums near 10^12·n).
func TestSpreadOfLargeOffset(t *testing.T) {
	var rs []accRec
	var vs []float64
	for i := range 3000 {
		v := 1e6 + 1
		if i%2 == 1 {
			v = 1e6 - 1
		}
		if i%7 == 0 {
			v += 0.5
		}
		rs = append(rs, accRec{t: 0.005 + float64(i)/100, v: v}) // 30 s of records, 100 a second
		vs = append(vs, v)
	}
	got := accRun(t, spreadConfig(30*time.Second, 10*time.Second), 100, rs)
	var mean, m2 float64
	for _, v := range vs {
		mean += v
	}
	mean /= float64(len(vs))
	for _, v := range vs {
		m2 += (v - mean) * (v - mean)
	}
	want := m2 / float64(len(vs))
	if v := got[0]; math.Abs(v[0]-want)/want > 1e-6 {
		t.Fatalf("window [0, 30s) of 3 panes: stdvar %v, two-pass %v", v[0], want)
	}
}

// TestSlidingWindowsMergeTheirPanes: each window of a sliding window is the merge of its panes,
// worked out here record by record: size 20 s, slide 10 s.
func TestSlidingWindowsMergeTheirPanes(t *testing.T) {
	rs := []accRec{{t: 1, v: 1, id: 1}, {t: 2, v: 3, id: 2}, {t: 11, v: 5, id: 2}, {t: 12, v: 7, id: 3}, {t: 21, v: 9, id: 3}}
	got := accRun(t, spreadConfig(20*time.Second, 10*time.Second), 100, rs)
	for start, want := range map[int64][2]float64{
		-10: {1, 2},       // 1, 3: mean 2, variance 1; ids 1, 2
		0:   {5, 3},       // 1, 3, 5, 7: mean 4, variance (9+1+1+9)/4; ids 1, 2, 3
		10:  {8.0 / 3, 2}, // 5, 7, 9: mean 7, variance 8/3; ids 2, 3
		20:  {0, 1},       // 9 alone
	} {
		if v := got[start]; len(v) != 2 || math.Abs(v[0]-want[0]) > 1e-12 || v[1] != want[1] {
			t.Errorf("window from %ds: %v, want %v", start, v, want)
		}
	}
}

// TestLateRecordCorrectsTheWindow: a late firing carries the whole window's figures again, the late
// record in them.
func TestLateRecordCorrectsTheWindow(t *testing.T) {
	got := accRun(t, spreadConfig(10*time.Second, 0), 100,
		[]accRec{{t: 1, v: 1, id: 1}, {t: 2, v: 3, id: 2}, {t: 15, v: 0}}, // W passes 10 s: [0, 10) fires
		[]accRec{{t: 3, v: 5, id: 3}})                                     // late: 1, 3, 5
	if v := got[0]; v[0] != 8.0/3 || v[1] != 3 {
		t.Fatalf("late firing: %v, want stdvar 8/3 and 3 distinct", v)
	}
}

// TestDistinctPastExactMode: 10^4 distinct ids over a sliding window's two panes, each id twice;
// the union within 3%.
func TestDistinctPastExactMode(t *testing.T) {
	var rs []accRec
	for i := range 10000 {
		id := mix(uint64(i))
		rs = append(rs, accRec{t: 1 + float64(i%2)*10, v: 1, id: id}, accRec{t: 12, v: 1, id: id})
	}
	got := accRun(t, spreadConfig(20*time.Second, 10*time.Second), 100, rs)
	if v := got[0][1]; math.Abs(v-10000)/10000 > 0.03 {
		t.Fatalf("window [0, 20s): %v distinct, want 10000 within 3%%", v)
	}
}

// TestAccumulatorsSurviveASnapshot: a snapshot taken mid-window restores the panes' accumulators.
func TestAccumulatorsSurviveASnapshot(t *testing.T) {
	cfg := spreadConfig(10*time.Second, 0)
	h := newHarness(t, cfg)
	h.clk.Set(time.Unix(100, 0))
	b := h.e.Begin(h.clk.Now())
	for i, v := range []float64{2, 4, 4, 4} {
		b.StageChecked(&Record{Time: int64(i+1) * sec, Value: v, IDs: []uint64{uint64(v)}})
	}
	b.Apply(func(int32, Verdict, int64) {})
	b.End()
	snap := h.e.Snapshot(nil)
	h2 := newHarness(t, cfg)
	h2.clk.Set(time.Unix(100, 0))
	if err := h2.e.Restore(snap); err != nil {
		t.Fatal(err)
	}
	b = h2.e.Begin(h2.clk.Now())
	for i, v := range []float64{5, 5, 7, 9} {
		b.StageChecked(&Record{Time: int64(i+5) * sec, Value: v, IDs: []uint64{uint64(v)}})
	}
	b.Apply(func(int32, Verdict, int64) {})
	b.End()
	var got []float64
	h2.e.FireAll(windowsOnly(func(r *Result) { got = append(got, r.Values...) }))
	if len(got) != 2 || got[0] != 4 || got[1] != 5 {
		t.Fatalf("after restore: %v, want stdvar 4 and 5 distinct", got)
	}
	// Another configuration's accumulators do not restore it.
	other := spreadConfig(10*time.Second, 0)
	other.Aggregations[0].Accumulators = other.Aggregations[0].Accumulators[:1]
	if err := newHarness(t, other).e.Restore(snap); err == nil {
		t.Fatal("a snapshot restored into an aggregation with other accumulators")
	}
}

// mix is SplitMix64's finalizer: identifiers come in as well-mixed hashes.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31) | 1
}

// TestVersion6SnapshotRestores: a snapshot written by the build before accumulators (testdata: a
// tumbling 10 s window with p50, records 1, 2, 3 at 1-3 s of series "k") restores into the same
// configuration, and not into one with accumulators.
func TestVersion6SnapshotRestores(t *testing.T) {
	snap, err := os.ReadFile("testdata/snapshot-v6.bin")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Size: 10 * time.Second, AllowedLateness: time.Minute, Aggregations: []Aggregation{{Quantiles: []float64{0.5}}}}
	h := newHarness(t, cfg)
	h.clk.Set(time.Unix(100, 0))
	if err := h.e.Restore(snap); err != nil {
		t.Fatal(err)
	}
	b := h.e.Begin(h.clk.Now())
	b.StageChecked(&Record{Key: []byte("k"), Time: 4 * sec, Value: 10})
	b.Apply(func(int32, Verdict, int64) {})
	b.End()
	var got []fired
	h.e.FireAll(windowsOnly(func(r *Result) { got = append(got, copyResult(r)) }))
	if len(got) != 1 || got[0].Count != 4 || got[0].Sum != 16 || got[0].Max != 10 || got[0].Key != "k" {
		t.Fatalf("after restoring version 6: %+v, want one window of 1, 2, 3, 10", got)
	}
	cfg.Aggregations[0].Accumulators = []AccumulatorKind{SpreadKind}
	if err := newHarness(t, cfg).e.Restore(snap); err == nil {
		t.Fatal("a version 6 snapshot restored into an aggregation with accumulators")
	}
}

// TestEarlyResultsSurviveASnapshot: with early results every 3 s of 10 s windows, a snapshot taken
// after one (what it sent kept, with a sketch for the histogram's aggregation, none for the
// percentiles' alone) restores, and the window's final delta points carry the rest: 2 of the 3
// records for each aggregation.
func TestEarlyResultsSurviveASnapshot(t *testing.T) {
	cfg := Config{Size: 10 * time.Second, EarlyResults: 3 * time.Second, AllowedLateness: time.Minute, FoldLate: true,
		Aggregations: []Aggregation{{Quantiles: []float64{0.5}}, {Histogram: true}}}
	h := newHarness(t, cfg)
	h.clk.Set(time.Unix(100, 0))
	send := func(e *Engine, ts ...int64) {
		b := e.Begin(h.clk.Now())
		for _, s := range ts {
			for agg := range 2 {
				b.StageChecked(&Record{Agg: agg, Key: []byte("k"), Time: s * sec, Value: float64(s)})
			}
		}
		b.Apply(func(int32, Verdict, int64) {})
		b.End()
	}
	type pt struct {
		agg               int
		start, end, count int64
		early             bool
	}
	var got []pt
	collect := func(e *Engine) {
		e.Collect(h.clk.Now(), func(r *Result) {
			if r.HasPoint {
				got = append(got, pt{r.Agg, r.Point.Start / sec, r.End / sec, int64(r.Point.Count), r.Early})
			}
		})
	}
	send(h.e, 11) // W = 11: the window [10, 20) is open
	send(h.e, 12)
	send(h.e, 13) // W = 13: the early result at 13, of 11 and 12 (13's record counts too: results so far)
	collect(h.e)
	h2 := newHarness(t, cfg)
	h2.clk.Set(time.Unix(100, 0))
	if err := h2.e.Restore(h.e.Snapshot(nil)); err != nil {
		t.Fatal(err)
	}
	send(h2.e, 14, 15)
	send(h2.e, 21) // W = 21: the window fires
	collect(h2.e)
	want := []pt{{0, 10, 13, 3, true}, {1, 10, 13, 3, true}, {0, 13, 20, 2, false}, {1, 13, 20, 2, false}}
	slices.SortFunc(got, func(a, b pt) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.agg, b.agg)) })
	if !slices.Equal(got[:min(len(got), 4)], want) {
		t.Fatalf("points %v, want %v first", got, want)
	}
}
