package stream

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// Focused tests of the watermark's contract (see doc.go). The harness's clock starts at 1000 s; every
// expected value is worked out by hand in the comments.

// srec is a record of aggregation agg from source src ("": no source named).
type srec struct {
	src string
	agg int
	key string
	t   float64 // seconds
	v   float64
}

// sbatch sends one batch at the clock's time, naming each record's source where it changes (records
// before the first that names one go with no source named), and returns the verdicts.
func (h *harness) sbatch(rs ...srec) []Verdict {
	b := h.e.Begin(h.clk.Now())
	out := make([]Verdict, len(rs))
	src := ""
	for i, r := range rs {
		if r.src != src {
			b.SetSource([]byte(r.src))
			src = r.src
		}
		out[i] = addOne(b, r.agg, []byte(r.key), int64(r.t*float64(sec)), r.v)
	}
	b.End()
	return out
}

// at sets the clock to s seconds.
func (h *harness) at(s float64) { h.clk.Set(time.Unix(0, int64(s*float64(sec)))) }

func (h *harness) wantW(want float64, what string) {
	h.t.Helper()
	if got, w := h.e.Watermark(), int64(want*float64(sec)); got != w {
		h.t.Fatalf("%s: Watermark() = %v s, want %v s", what, float64(got)/float64(sec), want)
	}
}

func perSource(maxSources int, sourceIdle time.Duration) Config {
	return Config{Size: 10 * time.Second, PerSource: true, SourceIdleTimeout: sourceIdle, MaxSources: maxSources,
		Aggregations: []Aggregation{{}}}
}

// A record stamped 2 minutes ahead of the collector's clock (within max_future_skew) is aggregated, but
// W stays at now - max_out_of_orderness.
func TestRecordAheadOfClockIsAggregatedAndWatermarkStaysAtClock(t *testing.T) {
	cfg := tumbling10s()
	cfg.MaxOutOfOrderness = 2 * time.Second
	h := newHarness(t, cfg) // now 1000 s, max_future_skew 5 min
	wantVerdicts(t, h.batch(rec{"a", 1125, 7}), OnTime)
	h.wantW(998, "after the record at 1125 s") // min(1125, 1000) - 2
	if st := h.e.Stats(); st.HeldBy != heldByClock {
		t.Fatalf("HeldBy %v, want clock", st.HeldBy)
	}
	if got := h.collect(); len(got) != 0 {
		t.Fatalf("fired with W at 998 s: %+v", got)
	}
	var all []fired
	h.e.FireAll(windowsOnly(func(r *Result) { all = append(all, copyResult(r)) }))
	if len(all) != 1 || all[0].Start != 1120 || all[0].Count != 1 || all[0].Sum != 7 {
		t.Fatalf("FireAll: %+v, want [1120, 1130) with the record", all)
	}
}

// As the clock advances, W follows it (less max_out_of_orderness) up to the record, and windows fire
// on the way.
func TestWatermarkFollowsClockUpToRecord(t *testing.T) {
	cfg := tumbling10s()
	cfg.MaxOutOfOrderness = 2 * time.Second
	h := newHarness(t, cfg)
	wantVerdicts(t, h.batch(rec{"a", 1005, 1}, rec{"a", 1120, 2}), OnTime, OnTime)
	h.wantW(998, "at 1000 s")
	h.at(1011)
	if got := h.collect(); len(got) != 0 {
		t.Fatalf("fired at W 1009 s: %+v", got)
	}
	h.wantW(1009, "at 1011 s")
	h.at(1012) // W = 1010: [1000, 1010) fires
	if got := h.collect(); len(got) != 1 || got[0].Start != 1000 || got[0].Count != 1 || got[0].Sum != 1 {
		t.Fatalf("at 1012 s: %+v, want [1000, 1010) with one record", got)
	}
	h.at(1100)
	h.wantW(1098, "at 1100 s")
	h.at(1122) // min(1120, 1122) - 2
	h.wantW(1118, "at 1122 s")
	h.at(1500) // the record is the limit now
	h.wantW(1118, "at 1500 s")
	if st := h.e.Stats(); st.HeldBy != heldByRecords {
		t.Fatalf("HeldBy %v, want records", st.HeldBy)
	}
	if got := h.collect(); len(got) != 0 {
		t.Fatalf("[1120, 1130) fired at W 1118 s: %+v", got)
	}
}

// With idle_timeout, one stray span 60 s ahead of the clock makes neither the records that follow it on
// time expire (W would be 1055 s without the clamp), nor the idle rule jump ahead.
func TestStraySpanAheadDoesNotExpireLaterRecords(t *testing.T) {
	cfg := tumbling10s()
	cfg.MaxOutOfOrderness = 5 * time.Second
	cfg.IdleTimeout = 10 * time.Second
	h := newHarness(t, cfg)
	wantVerdicts(t, h.batch(rec{"a", 999, 1}, rec{"stray", 1060, 1}), OnTime, OnTime)
	h.wantW(995, "at 1000 s")
	counts := map[int64]uint64{}
	for now := 1001.0; now <= 1030; now++ {
		h.at(now)
		// a second behind the clock: within max_out_of_orderness, on time
		wantVerdicts(t, h.batch(rec{"a", now - 1, 1}), OnTime)
		h.wantW(now-5, "during the stream")
		for _, f := range h.collect() {
			counts[f.Start] += f.Count
		}
	}
	// W reached 1025: [990, 1000) (999), [1000, 1010) (1000..1009) and [1010, 1020) (1010..1019) fired.
	if counts[990] != 1 || counts[1000] != 10 || counts[1010] != 10 || len(counts) != 3 {
		t.Fatalf("firings by window start: %v", counts)
	}
	// 15 s of silence: the idle rule advances from W at 1030 s, 1025, by 15 s: 1040, and no further
	// than the clock allows (1045 - 5 = 1040).
	h.at(1045)
	h.collect()
	h.wantW(1040, "after 15 s of silence")
	wantVerdicts(t, h.batch(rec{"a", 1044, 1}), OnTime)
	if st := h.e.Stats(); st.verdicts[Expired] != 0 {
		t.Fatalf("%d records expired", st.verdicts[Expired])
	}
}

// With per_source, a source 90 s behind the other holds W back, and its records are not expired,
// until it has been silent for source_idle_timeout; then W jumps to the other source.
func TestLaggingSourceHoldsWatermarkUntilSilent(t *testing.T) {
	h := newHarness(t, perSource(8, 30*time.Second))
	for now := 1000.0; now <= 1020; now += 5 {
		h.at(now)
		// b's record at now-90 is in [now-90, now-80), which W (b's previous record, now-95) has not
		// reached: on time.
		wantVerdicts(t, h.sbatch(srec{"a", 0, "k", now, 1}, srec{"b", 0, "k", now - 90, 1}), OnTime, OnTime)
		h.wantW(now-90, "a at the clock, b 90 s behind")
	}
	if st := h.e.Stats(); st.HeldBy != heldBySource || st.Sources != 2 {
		t.Fatalf("HeldBy %v Sources %d, want source and 2", st.HeldBy, st.Sources)
	}
	for now := 1025.0; now <= 1045; now += 5 {
		h.at(now)
		h.sbatch(srec{"a", 0, "k", now, 1})
	}
	h.at(1049.999)
	h.wantW(930, "b silent for 29.999 s") // b's last record: 1020 - 90
	h.at(1050)
	h.wantW(1045, "b silent for 30 s") // a's last record
	if st := h.e.Stats(); st.Sources != 1 {
		t.Fatalf("Sources %d, want 1", st.Sources)
	}
}

// With max_sources 2, the sources past the limit are held in the shared source, whose event time is the
// greatest of theirs.
func TestSourcesPastMaxSourcesShareOneSource(t *testing.T) {
	h := newHarness(t, perSource(2, 30*time.Second))
	b := h.e.Begin(h.clk.Now())
	for _, c := range []struct {
		src    string
		t      float64
		shared bool
	}{{"a", 1000, false}, {"b", 990, false}, {"c", 950, true}, {"d", 980, true}} {
		if got := b.SetSource([]byte(c.src)); got != c.shared {
			t.Fatalf("SetSource(%q) = %v, want %v", c.src, got, c.shared)
		}
		if vd := addOne(b, 0, []byte("k"), int64(c.t*float64(sec)), 1); vd != OnTime {
			t.Fatalf("%s: %v", c.src, vd)
		}
	}
	b.End()
	// a 1000, b 990, shared max(950, 980) = 980
	h.wantW(980, "the shared source holds W")
	if st := h.e.Stats(); st.Sources != 3 {
		t.Fatalf("Sources %d, want 3 (a, b and the shared one)", st.Sources)
	}
}

// A silent source's slot is freed and reused, also when the source never had a record accepted, with no
// Collect in between; the new source does not inherit anything from the old one.
func TestSilentSourceSlotIsFreedAndReused(t *testing.T) {
	h := newHarness(t, perSource(1, 30*time.Second))
	h.sbatch(srec{"a", 0, "k", 1000, 1}, srec{"b", 0, "k", 900, 1}) // a: own slot; b: shared
	h.wantW(900, "b in the shared source")
	h.at(1031) // a and the shared source silent since 1030
	b := h.e.Begin(h.clk.Now())
	if b.SetSource([]byte("b")) {
		t.Fatal("b in the shared source although a's slot is free")
	}
	addOne(b, 0, []byte("k"), 1025*sec, 1)
	b.End()
	// W was 900 until 1030 and then held by no source; b's record: 1025.
	h.wantW(1025, "b in its own slot")

	// A source named with a record that is not accepted holds the slot until it is silent too.
	h2 := newHarness(t, perSource(1, 30*time.Second))
	wantVerdicts(t, h2.sbatch(srec{"x", 0, "k", 2000, 1}), Future) // 1000 s ahead: beyond max_future_skew
	h2.at(1029)
	b = h2.e.Begin(h2.clk.Now())
	if !b.SetSource([]byte("y")) {
		t.Fatal("y has a slot of its own while x holds the only one")
	}
	b.End()
	h2.at(1030) // x silent for 30 s
	b = h2.e.Begin(h2.clk.Now())
	if b.SetSource([]byte("y")) {
		t.Fatal("y in the shared source after x fell silent")
	}
	b.End()
}

// Time the collector was not running is not silence: after Restore the idle rule waits idle_timeout
// from the restore, and every restored source counts as heard from at the restore.
func TestRestoreDoesNotCountDowntimeAsSilence(t *testing.T) {
	// restoreAt restores a snapshot of e into a fresh engine whose clock reads s seconds.
	restoreAt := func(cfg Config, e *Engine, s float64) *harness {
		h := newHarness(t, cfg)
		h.at(s)
		if err := h.e.Restore(e.Snapshot(nil)); err != nil {
			t.Fatal(err)
		}
		return h
	}
	cfg := tumbling10s()
	cfg.IdleTimeout = 10 * time.Second
	h := newHarness(t, cfg)
	h.batch(rec{"a", 995, 1})
	h.wantW(995, "before the snapshot")
	h = restoreAt(cfg, h.e, 1100) // 100 s down
	h.wantW(995, "right after the restore")
	h.at(1109)
	h.collect()
	h.wantW(995, "9 s after the restore")
	h.at(1110)
	h.collect()
	h.wantW(1005, "10 s after the restore") // 995 + 10

	cfg = perSource(8, 30*time.Second)
	h = newHarness(t, cfg)
	h.sbatch(srec{"a", 0, "k", 1000, 1}, srec{"b", 0, "k", 910, 1})
	h.wantW(910, "before the snapshot")
	h = restoreAt(cfg, h.e, 1200) // 200 s down
	if st := h.e.Stats(); st.Sources != 2 {
		t.Fatalf("Sources %d after the restore, want 2", st.Sources)
	}
	h.at(1210)
	h.sbatch(srec{"a", 0, "k", 1210, 1})
	h.wantW(910, "b heard from at the restore") // b silent only from 1230
	h.at(1229)
	h.collect()
	h.wantW(910, "b silent for 29 s since the restore")
	h.at(1230)
	h.collect()
	h.wantW(1210, "b silent for 30 s since the restore")
}

// Drain fires the marked aggregations' open windows as they stand (a late firing for a fired window with
// late records, a first firing for the others), forgets their series and leaves W where it is; records
// that come after are judged by that W and aggregated into new series.
func TestDrainFiresMarkedAggregationsAndKeepsWatermark(t *testing.T) {
	cfg := Config{Size: 10 * time.Second, AllowedLateness: 10 * time.Second, Aggregations: []Aggregation{{}, {}}}
	h := newHarness(t, cfg)
	h.at(1010)
	wantVerdicts(t, h.sbatch(srec{"", 0, "k", 995, 1}, srec{"", 0, "k", 1001, 2}, srec{"", 1, "k", 1003, 4}),
		OnTime, OnTime, OnTime)
	h.wantW(1003, "after the first batch")
	if got := h.collect(); len(got) != 1 || got[0].Agg != 0 || got[0].Start != 990 || got[0].Count != 1 {
		t.Fatalf("first Collect: %+v, want agg0 [990, 1000)", got)
	}
	wantVerdicts(t, h.sbatch(srec{"", 0, "k", 996, 5}), LateUpdate) // 1000 <= 1003 < 1010
	var drained []fired
	h.e.Drain([]bool{true, false}, windowsOnly(func(r *Result) { drained = append(drained, copyResult(r)) }))
	sort.Slice(drained, func(i, j int) bool { return drained[i].Start < drained[j].Start })
	if len(drained) != 2 ||
		!(drained[0].Agg == 0 && drained[0].Start == 990 && drained[0].Late && drained[0].Count == 1 && drained[0].Sum == 5) ||
		!(drained[1].Agg == 0 && drained[1].Start == 1000 && !drained[1].Late && drained[1].Count == 1 && drained[1].Sum == 2) {
		t.Fatalf("Drain: %+v, want agg0 [990, 1000) late (996) and agg0 [1000, 1010) first (1001)", drained)
	}
	h.wantW(1003, "after Drain")
	if st := h.e.Stats(); st.ActiveSeries[0] != 0 || st.ActiveSeries[1] != 1 {
		t.Fatalf("ActiveSeries %v, want [0 1]", st.ActiveSeries)
	}
	wantVerdicts(t, h.sbatch(srec{"", 0, "k", 1002, 8}), OnTime)
	if st := h.e.Stats(); st.ActiveSeries[0] != 1 {
		t.Fatalf("ActiveSeries %v, want a new series of agg0", st.ActiveSeries)
	}
	h.at(1020)
	h.sbatch(srec{"", 1, "k", 1015, 1}) // W = 1015: [1000, 1010) fires
	got := h.collect()
	sort.Slice(got, func(i, j int) bool { return got[i].Agg < got[j].Agg })
	if len(got) != 2 ||
		!(got[0].Agg == 0 && got[0].Start == 1000 && !got[0].Late && got[0].Count == 1 && got[0].Sum == 8) ||
		!(got[1].Agg == 1 && got[1].Start == 1000 && !got[1].Late && got[1].Count == 1 && got[1].Sum == 4) {
		t.Fatalf("Collect after Drain: %+v, want agg0 [1000, 1010) with 1002 only, agg1 [1000, 1010) with 1003", got)
	}
}

// expiredUnder reports whether every window holding t has expired at watermark w, for windows of size
// and slide and an allowed lateness: the latest of them ends at floor(t/slide)*slide + size, and it
// expires at its end plus the lateness.
func expiredUnder(t, w, size, slide, lateness int64) bool {
	return floorDiv(t, slide)*slide+size+lateness <= w
}

// The watermark Apply passes with an Expired record is one under which every window of the record has
// expired, no older than the batch's.
func TestExpiredRecordsWatermarkExpiresAllItsWindows(t *testing.T) {
	cfg := Config{Size: 30 * time.Second, Slide: 10 * time.Second, AllowedLateness: 5 * time.Second,
		Aggregations: []Aggregation{{MaxSeries: 2}}}
	h := newHarness(t, cfg)
	h.batch(rec{"a", 1000, 1}) // W = 1000
	b := h.e.Begin(h.clk.Now())
	// At W 1000 with lateness 5: 975 is in the windows ending 980, 990 and 1000, the last fired and
	// live until 1005: late; 985 (ends 990, 1000, 1010) late too; 965 (ends 970..990) and 930 expired;
	// 1005 on time. Five keys with max_series 2: the overflow series too.
	ts := []int64{975, 985, 965, 930, 1005}
	keys := []string{"a", "b", "c", "d", "e"}
	for i, s := range ts {
		stage(b, 0, []byte(keys[i]), s*sec, 1, int32(i))
	}
	type judged struct {
		vd Verdict
		w  int64
	}
	got := map[int32]judged{}
	b.Apply(func(tag int32, vd Verdict, w int64) { got[tag] = judged{vd, w} })
	b.End()
	if got[0].vd != LateUpdate || got[1].vd != LateUpdate || got[2].vd != Expired || got[3].vd != Expired || len(got) != 4 {
		t.Fatalf("verdicts %v, want 975 and 985 late, 965 and 930 expired, 1005 on time", got)
	}
	for tag, j := range got {
		if j.w != 1000*sec {
			t.Errorf("record %d: judged by W %v s, want 1000 s", tag, float64(j.w)/float64(sec))
		}
		if j.vd == Expired && !expiredUnder(ts[tag]*sec, j.w, 30*sec, 10*sec, 5*sec) {
			t.Errorf("record %d at %d s: expired under W %v s, when not every window of it has", tag, ts[tag], float64(j.w)/float64(sec))
		}
	}
}

// The same under 4 goroutines ingesting at once while the clock and Collect move W: each Expired
// record's watermark expires every window of it, and lies between its batch's and the engine's W.
func TestExpiredRecordsWatermarkUnderConcurrentIngest(t *testing.T) {
	size, slide, lateness := 30*sec, 10*sec, 5*sec
	clk := clock.NewFake(time.Unix(1000, 0))
	e, err := New(Config{Size: time.Duration(size), Slide: time.Duration(slide), AllowedLateness: time.Duration(lateness),
		MaxOutOfOrderness: 2 * time.Second, IdleTimeout: 3 * time.Second, MaxFutureSkew: time.Minute, shards: 4, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: 20}, {MaxSeries: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	problem := func(p string) {
		mu.Lock()
		if len(problems) < 10 {
			problems = append(problems, p)
		}
		mu.Unlock()
	}
	var expired [4]int
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 300 {
				now := clk.Now()
				b := e.Begin(now)
				var ts []int64
				for i := range 1 + rng.IntN(30) {
					t := now - rng.Int64N(80*sec) + 10*sec // from 70 s behind the clock to 10 s ahead
					ts = append(ts, t)
					stage(b, rng.IntN(2), []byte{byte('a' + rng.IntN(26))}, t, 1, int32(i))
				}
				bw, maxW := b.Watermark(), int64(math.MinInt64)
				b.Apply(func(tag int32, vd Verdict, w int64) {
					maxW = max(maxW, w)
					if vd != Expired {
						return
					}
					expired[g]++
					if !expiredUnder(ts[tag], w, size, slide, lateness) {
						problem("an Expired record's watermark does not expire every window of it")
					}
					if w < bw {
						problem("a record judged by a watermark older than its batch's")
					}
				})
				if w := e.Watermark(); w < maxW {
					problem("a record judged by a watermark ahead of the engine's")
				}
				b.End()
			}
		}()
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		rng := rand.New(rand.NewPCG(9, 9))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			clk.Advance(time.Duration(rng.Int64N(int64(700 * time.Millisecond))))
			e.Collect(clk.Now(), func(*Result) {})
			if i%50 == 0 {
				_ = e.Stats()
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-stopped
	for _, p := range problems {
		t.Error(p)
	}
	n := expired[0] + expired[1] + expired[2] + expired[3]
	if n == 0 {
		t.Fatal("no record expired")
	}
	t.Logf("%d expired records checked", n)
}

// validate bounds size/slide, a record's windows and its firings, at MaxPanesPerWindow.
func TestValidateBoundsPanesPerWindow(t *testing.T) {
	for _, c := range []struct {
		size time.Duration
		ok   bool
	}{{10000, true}, {10001, false}, {10000 * time.Second, true}, {10001 * time.Second, false}} {
		slide := time.Duration(1)
		if c.size >= time.Second {
			slide = time.Second
		}
		err := Config{Size: c.size, Slide: slide, Aggregations: []Aggregation{{MaxSeries: 1}}}.validate()
		if (err == nil) != c.ok {
			t.Errorf("size %v slide %v: validate() = %v, want ok=%v", c.size, slide, err, c.ok)
		}
	}
}

// A snapshot keeps the sources: their event times (the shared source's too), and which sources have a
// slot of their own.
func TestSnapshotRoundTripKeepsSources(t *testing.T) {
	cfg := perSource(2, 30*time.Second)
	h := newHarness(t, cfg)
	h.sbatch(srec{"a", 0, "k", 1000, 1}, srec{"b", 0, "k", 970, 1}, srec{"c", 0, "k", 960, 1}) // c: shared
	h.wantW(960, "before the snapshot")
	h.at(1001)
	h.sbatch(srec{"c", 0, "k", 985, 1}) // shared: 985, so b (970) holds W
	h.wantW(970, "b holds W")
	snap := h.e.Snapshot(nil)

	h2 := newHarness(t, cfg)
	h2.at(1001)
	if err := h2.e.Restore(snap); err != nil {
		t.Fatal(err)
	}
	h2.wantW(970, "after the restore")
	if st := h2.e.Stats(); st.Sources != 3 || st.HeldBy != heldBySource {
		t.Fatalf("after the restore: Sources %d HeldBy %v, want 3 and source", st.Sources, st.HeldBy)
	}
	h2.at(1002)
	b := h2.e.Begin(h2.clk.Now())
	if b.SetSource([]byte("a")) || b.SetSource([]byte("b")) || !b.SetSource([]byte("d")) {
		t.Fatal("after the restore a and b have slots of their own, d is past max_sources")
	}
	b.End()
	// b moves on to 1002: the shared source (985) holds W now.
	h2.sbatch(srec{"b", 0, "k", 1002, 1})
	h2.wantW(985, "the restored shared source holds W")
}

// W after End stays where the batch's records raised it, even if nobody read it: when a batch that began
// before ends later with a source further behind, and when the source that raised it falls silent.
func TestWatermarkAfterEndHoldsWithoutBeingRead(t *testing.T) {
	h := newHarness(t, perSource(4, 30*time.Second))
	b1, b2 := h.e.Begin(h.clk.Now()), h.e.Begin(h.clk.Now())
	b1.SetSource([]byte("a"))
	addOne(b1, 0, []byte("k"), 995*sec, 1)
	b1.End() // W = 995
	b2.SetSource([]byte("b"))
	addOne(b2, 0, []byte("k"), 900*sec, 1)
	b2.End() // b is behind, but W does not move back
	h.wantW(995, "after both batches")

	h = newHarness(t, perSource(4, 30*time.Second))
	b := h.e.Begin(h.clk.Now())
	b.SetSource([]byte("a"))
	addOne(b, 0, []byte("k"), 995*sec, 1)
	b.End()
	h.at(1031) // a silent since 1030
	h.wantW(995, "after a fell silent")
}

// Reading the watermark does not change it: two engines fed alike report the same W, whether or not W
// was read while the sources fell silent one after the other.
func TestReadingWatermarkDoesNotChangeIt(t *testing.T) {
	var ws []int64
	for _, read := range []bool{false, true} {
		h := newHarness(t, perSource(4, 30*time.Second))
		h.sbatch(srec{"a", 0, "k", 910, 1}, srec{"b", 0, "k", 1000, 1}) // W = 910, a holds it
		h.at(1010)
		h.sbatch(srec{"b", 0, "k", 1010, 1}) // a silent from 1030, b from 1040
		if read {
			h.at(1035)
			h.wantW(1010, "a silent, b holds W") // min(1010, 1035)
		}
		h.at(1045)
		ws = append(ws, h.e.Watermark())
	}
	// Between 1030 and 1040 only b was heard from: W reached 1010 then.
	if ws[0] != 1010*sec || ws[1] != 1010*sec {
		t.Fatalf("W at 1045 s: %v s unread, %v s read; want 1010 s both", float64(ws[0])/float64(sec), float64(ws[1])/float64(sec))
	}
}

// A snapshot taken while other goroutines ingest restores: a concurrent Begin or End may raise W
// while the snapshot is taken, and the snapshot must still be one state.
func TestSnapshotDuringIngestRestores(t *testing.T) {
	h := newHarness(t, Config{Size: 10 * time.Second, MaxFutureSkew: time.Hour, Aggregations: []Aggregation{{}}})
	var stop sync.WaitGroup
	done := make(chan struct{})
	stop.Add(1)
	go func() {
		defer stop.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			h.clk.Advance(time.Millisecond) // the clock moves between batches: W with it
			b := h.e.Begin(h.clk.Now())
			addOne(b, 0, []byte("k"), h.clk.Now()+int64(time.Minute), 1) // ahead: W follows the clock
			b.End()
		}
	}()
	for i := range 300 {
		snap := h.e.Snapshot(nil)
		fresh := newHarness(t, Config{Size: 10 * time.Second, MaxFutureSkew: time.Hour, Aggregations: []Aggregation{{}}})
		if err := fresh.e.Restore(snap); err != nil {
			close(done)
			stop.Wait()
			t.Fatalf("snapshot %d taken during ingest: %v", i, err)
		}
	}
	close(done)
	stop.Wait()
}

// A snapshot of another format version does not restore: no release has been made, so there is one
// format. The refusal names the version, and the engine stays empty and usable.
func TestOtherSnapshotVersionsDoNotRestore(t *testing.T) {
	cfg := Config{Size: 10 * time.Second, Aggregations: []Aggregation{{}}}
	h := newHarness(t, cfg)
	h.sbatch(srec{"", 0, "k", 995, 1})
	snap := h.e.Snapshot(nil)
	if snap[len(snapshotMagic)] != snapshotVersion {
		t.Fatalf("the version is not the byte after the magic: %v", snap[:8])
	}
	for _, v := range []byte{1, 3, 4, snapshotVersion + 1} {
		other := slices.Clone(snap)
		other[len(snapshotMagic)] = v
		h2 := newHarness(t, cfg)
		err := h2.e.Restore(other)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", v)) {
			t.Fatalf("a version %d snapshot: Restore returned %v, want a refusal naming the version", v, err)
		}
		h2.sbatch(srec{"", 0, "k", 995, 1})
		h2.at(1006)
		h2.sbatch(srec{"", 0, "k", 1005, 1}) // W = 1005: [990, 1000) fires
		var got []fired
		h2.e.Collect(h2.clk.Now(), windowsOnly(func(r *Result) { got = append(got, copyResult(r)) }))
		if len(got) != 1 || got[0].Count != 1 {
			t.Fatalf("after refusing a version %d snapshot the engine fired %+v, want its own record alone", v, got)
		}
	}
	if err := newHarness(t, cfg).e.Restore(snap); err != nil {
		t.Fatalf("this version's snapshot: %v", err)
	}
}
