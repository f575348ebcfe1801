package stream

// The randomized tests that hold the engine to the reference model (model_test.go) on the streams of
// model_scenario_test.go: every configuration one batch at a time and staged, overflow, concurrent
// ingest, and snapshots and restores.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

func TestEngineMatchesReferenceModel(t *testing.T) {
	for _, c := range modelConfigs() {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			runSeeds(t, &c, runOptions{})
		})
	}
}

// TestStagedBatchesMatchReferenceModel runs the same scenarios with every batch staged and applied at
// once (the component's path), which groups its records by shard.
func TestStagedBatchesMatchReferenceModel(t *testing.T) {
	for _, c := range modelConfigs() {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			runSeeds(t, &c, runOptions{staged: true})
		})
	}
}

// TestOverflowConservesRecords runs streams with few series slots and many keys: whatever goes to the
// overflow series, the records of every window, summed over its series, must all come out, and the
// regular series must never exceed max_series. The wall clock keeps up with the records, so that
// series are released only at a Collect and the series that fire at one Collect were held at once.
func TestOverflowConservesRecords(t *testing.T) {
	s := time.Second
	configs := []modelConfig{
		{name: "overflow-tumbling", size: 10 * s, lateness: 5 * s, ooo: s, idle: 15 * s, skew: 30 * s, keys: 12,
			seeds: 20, ops: 40, maxSeries: 2, clockKeepsUp: true, aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "overflow-sliding", size: 4 * s, slide: s, lateness: 3 * s, skew: 30 * s, keys: 10,
			seeds: 20, ops: 30, maxSeries: 3, clockKeepsUp: true, aggs: []Aggregation{{Histogram: true}}},
	}
	for _, c := range configs {
		for _, staged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/staged=%v", c.name, staged), func(t *testing.T) {
				t.Parallel()
				failures := 0
				for seed := range uint64(seedsFor(&c)) {
					sc := genScenario(&c, seed)
					if msg := runOverflowScenario(sc, staged); msg != "" {
						failures++
						if failures <= 3 {
							t.Errorf("%s seed %d: %s\nstream:\n%s", c.name, seed, msg, describeScenario(sc))
						}
					}
				}
			})
		}
	}
}

// applyRecords puts recs into b, one at a time (addOne) or, when staged, with stage and one Apply, and
// returns the engine's verdict for each.
func applyRecords(b *Batch, recs []refRec, staged bool) []Verdict {
	out := make([]Verdict, len(recs))
	for j, r := range recs {
		if staged {
			out[j] = stageRec(b, &r, []byte(r.key), int32(j))
		} else {
			out[j] = addRec(b, &r, []byte(r.key))
		}
	}
	if staged {
		b.Apply(func(tag int32, vd Verdict, _ int64) { out[tag] = vd })
	}
	return out
}

// aggWin is a window of one aggregation, over all its series: what a tally of records per window counts
// by.
type aggWin struct {
	agg   int
	start int64
}

// conservationProblems checks the accounting after FireAll: the Counts of all firings of each window
// (carried) must add up to the records the model added to it, and e must hold no series.
func conservationProblems(e *Engine, m *refModel, carried map[aggWin]uint64, tf timeFmt, size int64) []string {
	added := map[aggWin]uint64{}
	for id, n := range m.added {
		added[aggWin{id.agg, id.start}] += n
	}
	return append(windowCountProblems(carried, added, tf, size), heldSeriesProblems(e.Stats())...)
}

// windowCountProblems compares, window by window, the records the firings carried with those added.
func windowCountProblems(carried, added map[aggWin]uint64, tf timeFmt, size int64) []string {
	var bad []string
	for k, n := range added {
		if carried[k] != n {
			bad = append(bad, fmt.Sprintf("agg%d window %s: firings carried %d records, %d were added", k.agg, tf.window(k.start, k.start+size), carried[k], n))
		}
	}
	for k, n := range carried {
		if added[k] == 0 {
			bad = append(bad, fmt.Sprintf("agg%d window %s: firings carried %d records, none was added", k.agg, tf.window(k.start, k.start+size), n))
		}
	}
	return bad
}

// heldSeriesProblems reports the series, regular or overflow, that st says are held: after FireAll
// there must be none.
func heldSeriesProblems(st Stats) []string {
	var bad []string
	for a, n := range st.ActiveSeries {
		if n != 0 || st.OverflowActive[a] {
			bad = append(bad, fmt.Sprintf("after FireAll agg%d: ActiveSeries %d, OverflowActive %v", a, n, st.OverflowActive[a]))
		}
	}
	return bad
}

func runOverflowScenario(sc *scenario, staged bool) string {
	c := sc.cfg
	tf := timeFmt{sc.base}
	e, clk := newModelEngine(c, sc.base)
	m := newRefModel(c)
	got := map[aggWin]uint64{}
	check := func(fs []firingRec, when string) string {
		regular := make([]map[string]bool, len(c.aggs))
		for i := range regular {
			regular[i] = map[string]bool{}
		}
		for i := range fs {
			f := &fs[i]
			got[aggWin{f.Agg, f.Start}] += f.Count
			if f.Overflow && f.Key != "" {
				return fmt.Sprintf("%s: overflow firing with key %q", when, f.Key)
			}
			if !f.Overflow {
				regular[f.Agg][f.Key] = true
			}
		}
		for a, keys := range regular {
			if len(keys) > c.maxSeries {
				return fmt.Sprintf("%s: %d regular series of agg%d fired at one Collect, max_series is %d", when, len(keys), a, c.maxSeries)
			}
		}
		st := e.Stats()
		for a, n := range st.ActiveSeries {
			if n < 0 || n > int64(c.maxSeries) {
				return fmt.Sprintf("%s: Stats().ActiveSeries[%d] = %d, max_series %d", when, a, n, c.maxSeries)
			}
		}
		return ""
	}
	for i, op := range sc.ops {
		clk.Set(time.Unix(0, op.batchNow))
		b := e.Begin(op.batchNow)
		mb := m.begin(op.batchNow)
		got := applyRecords(b, op.recs, staged)
		for j, r := range op.recs {
			if g, w := got[j], mb.addRec(r); g != w {
				return fmt.Sprintf("op %d record %d (agg%d %q t=%s): verdict %v, want %v", i, j, r.agg, r.key, tf.t(r.t), g, w)
			}
		}
		b.End()
		mb.end()
		m.collect(op.collectNow)
		clk.Set(time.Unix(0, op.collectNow))
		if msg := check(collectFiringsOf(e, op.collectNow, false), fmt.Sprintf("op %d", i)); msg != "" {
			return msg
		}
		if g, w := e.Watermark(), m.watermark(); g != w {
			return fmt.Sprintf("op %d: Watermark() = %s, want %s", i, tf.t(g), tf.t(w))
		}
	}
	if msg := check(fireAllFirings(e), "FireAll"); msg != "" {
		return msg
	}
	bad := conservationProblems(e, m, got, tf, int64(c.size))
	sort.Strings(bad)
	return strings.Join(bad, "\n")
}

// TestConcurrentIngestConservesRecords ingests from several goroutines while another collects (and
// snapshots); in a tumbling configuration every aggregated record is in exactly one window, so the
// counts of all firings of a window must add up to the records aggregated into it.
func TestConcurrentIngestConservesRecords(t *testing.T) {
	s := int64(time.Second)
	clk := clock.NewFake(time.Unix(0, realNow))
	cfg := Config{Size: 10 * time.Second, AllowedLateness: 20 * time.Second, MaxOutOfOrderness: 2 * time.Second,
		IdleTimeout: 3 * time.Second, MaxFutureSkew: 10 * time.Second, shards: 4, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: 1000, Quantiles: fullQuantiles, Histogram: true}, {MaxSeries: 3}}}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const workers, batches = 4, 400
	tallies := make([]map[aggWin]uint64, workers)
	verdicts := make([][numVerdicts]uint64, workers)
	var wg sync.WaitGroup
	var done atomic.Bool
	var collects atomic.Int64
	for w := range workers {
		tallies[w] = map[aggWin]uint64{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			// at least `batches` batches, and on until the collector has run 150 times
			for i := 0; i < batches || (collects.Load() < 150 && i < 20*batches); i++ {
				now := clk.Now()
				b := e.Begin(now)
				staged := w%2 == 1 // odd workers stage their batches and apply them at once
				var recs []refRec
				var got []Verdict
				for range 1 + rng.IntN(20) {
					t := now - randIn(rng, -12*s, 40*s)
					if rng.IntN(50) == 0 {
						t = 0
					}
					r := refRec{agg: rng.IntN(2), key: "k" + strconv.Itoa(rng.IntN(8)), t: t, v: genValue(rng, nil, 5)}
					recs = append(recs, r)
					if !staged {
						got = append(got, addOne(b, r.agg, []byte(r.key), r.t, r.v))
						if rng.IntN(8) == 0 {
							runtime.Gosched() // let a Collect run in the middle of the batch
						}
					}
				}
				if staged {
					got = applyRecords(b, recs, true)
				}
				for j, v := range got {
					if v >= numVerdicts {
						panic(fmt.Sprintf("verdict %d", v))
					}
					verdicts[w][v]++
					if r := recs[j]; v.Aggregated() {
						tallies[w][aggWin{r.agg, r.t - mod(r.t, 10*s)}]++
					}
				}
				b.End()
			}
		}()
	}
	got := map[aggWin]uint64{}
	firsts := map[windowID]int{}
	var problems []string
	collect := windowsOnly(func(r *Result) {
		got[aggWin{r.Agg, r.Start}] += r.Count
		if r.End-r.Start != 10*s || mod(r.Start, 10*s) != 0 || r.Count == 0 {
			problems = append(problems, fmt.Sprintf("odd firing %+v", *r))
		}
		if !r.late {
			if firsts[windowID{r.Agg, r.Overflow, r.Key, r.Start}]++; firsts[windowID{r.Agg, r.Overflow, r.Key, r.Start}] > 1 {
				problems = append(problems, fmt.Sprintf("second first firing of window %+v", *r))
			}
		}
	})
	collectorDone := make(chan struct{})
	go func() {
		defer close(collectorDone)
		rng := rand.New(rand.NewPCG(99, 7))
		lastW := int64(math.MinInt64)
		for i := 0; !done.Load(); i++ {
			now := clk.Advance(time.Duration(randIn(rng, 0, 400) * int64(time.Millisecond)))
			if rng.IntN(25) == 0 {
				now = clk.Advance(5 * time.Second) // let the idle rule act
			}
			e.Collect(now, collect)
			collects.Add(1)
			if i%20 == 0 {
				_ = e.Snapshot(nil)
				_ = e.Stats()
			}
			if w := e.Watermark(); w < lastW {
				problems = append(problems, fmt.Sprintf("watermark went back from %d to %d", lastW, w))
			} else {
				lastW = w
			}
			runtime.Gosched()
		}
	}()
	wg.Wait()
	done.Store(true)
	<-collectorDone
	e.Collect(clk.Now(), collect)
	e.FireAll(collect)
	for _, p := range problems[:min(len(problems), 10)] {
		t.Error(p)
	}
	want := map[aggWin]uint64{}
	var wantVerdicts [numVerdicts]uint64
	var aggregated, carried uint64
	for w := range workers {
		for k, n := range tallies[w] {
			want[k] += n
			aggregated += n
		}
		for v, n := range verdicts[w] {
			wantVerdicts[v] += n
		}
	}
	for _, p := range windowCountProblems(got, want, timeFmt{realNow}, 10*s) {
		t.Error(p)
	}
	for _, n := range got {
		carried += n
	}
	if carried != aggregated {
		t.Errorf("firings carried %d records in all, %d were aggregated", carried, aggregated)
	}
	st := e.Stats()
	if st.verdicts != wantVerdicts {
		t.Errorf("Stats().verdicts = %v, the Adds returned %v", st.verdicts, wantVerdicts)
	}
	for _, p := range heldSeriesProblems(st) {
		t.Error(p)
	}
	t.Logf("%d records aggregated, verdicts %v, %d Collects", aggregated, wantVerdicts, collects.Load())
}

// TestSnapshotRestoreMidStream snapshots and restores the engine at random points of random streams
// (between End and Collect, and after Collect, sometimes after some downtime) and requires every
// verdict, watermark and firing to be the model's, whose restore is a restart (the idle rule and every
// restored source count from the restore's wall time), and to be bit for bit those of an uninterrupted
// engine for as long as the restarts have not changed W.
func TestSnapshotRestoreMidStream(t *testing.T) {
	for _, c := range modelConfigs() {
		c.seeds = max(c.seeds/8, 3)
		if c.name == "sliding60s/1s" {
			c.seeds = 2
		}
		c.snapBeforeCollectRate, c.snapAfterCollectRate = 0.08, 0.08
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			t.Parallel()
			runSeeds(t, &c, runOptions{snapshots: true})
		})
	}
}

// TestSnapshotHalfwayEqualsUninterrupted is the plain round trip: half a stream, Snapshot, Restore into
// a fresh engine with a fresh clock at the same time, the other half; all firings must equal those of an
// engine that ran the whole stream (unless the restart, from which the idle rule counts afresh, changed
// W: then those of the model).
func TestSnapshotHalfwayEqualsUninterrupted(t *testing.T) {
	for _, c := range modelConfigs()[:5] {
		for seed := range uint64(4) {
			sc := genScenario(&c, 1000+seed)
			half := len(sc.ops) / 2
			sc.ops[half].snapAfterCollect = true
			if f := runScenario(sc, runOptions{snapshots: true}); f != nil {
				t.Errorf("%s seed %d: %s\nstream:\n%s", c.name, 1000+seed, f, describeScenario(sc))
			}
		}
	}
}

// TestRestoreRejectsDamagedSnapshots feeds Restore every truncation of a real snapshot, garbage and a
// snapshot of another configuration; each must fail, and the engine must then work as a fresh one.
func TestRestoreRejectsDamagedSnapshots(t *testing.T) {
	cs := modelConfigs()
	c := &cs[1] // two aggregations, one with quantiles and a histogram
	sc := genScenario(c, 5)
	e, _ := newModelEngine(c, sc.base)
	half := len(sc.ops) / 2
	for i, op := range sc.ops[:half] {
		b := e.Begin(op.batchNow)
		for _, r := range op.recs {
			addRec(b, &r, []byte(r.key))
		}
		b.End()
		if i < half-1 { // leave the last batch's firings pending, so that the snapshot carries results
			e.Collect(op.collectNow, func(*Result) {})
		}
	}
	snap := e.Snapshot(nil)
	if len(snap) < 100 {
		t.Fatalf("snapshot of %d bytes: the stream left too little state", len(snap))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var damaged [][]byte
	for n := range len(snap) {
		if n < 300 || rng.IntN(max(len(snap)/300, 1)) == 0 {
			damaged = append(damaged, snap[:n])
		}
	}
	damaged = append(damaged, nil, []byte("WAGS"), []byte("XXXX\x01"), append(slices.Clone(snap), 0))
	for range 50 {
		g := make([]byte, rng.IntN(200))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		damaged = append(damaged, g, append([]byte("WAGS\x01"), g...))
	}
	for i, d := range damaged {
		fresh, _ := newModelEngine(c, sc.base)
		if err := fresh.Restore(d); err == nil {
			t.Fatalf("damaged snapshot %d (%d of %d bytes) restored without error", i, len(d), len(snap))
		}
	}
	// another configuration
	other := *c
	other.lateness++
	oe, _ := newModelEngine(&other, sc.base)
	if err := oe.Restore(snap); err == nil {
		t.Fatal("a snapshot restored into an engine with another allowed lateness")
	}
	other = *c
	other.aggs = []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {Histogram: true}}
	oe, _ = newModelEngine(&other, sc.base)
	if err := oe.Restore(snap); err == nil {
		t.Fatal("a snapshot restored into an engine with other aggregations")
	}
	// byte flips must not panic; Restore may or may not notice them
	for range 300 {
		d := slices.Clone(snap)
		d[rng.IntN(len(d))] ^= byte(1 + rng.IntN(255))
		fresh, _ := newModelEngine(c, sc.base)
		if fresh.Restore(d) == nil {
			fresh.Collect(sc.base, func(*Result) {})
			fresh.FireAll(func(*Result) {})
		}
	}
	// after a failed Restore, the engine works as a fresh one: the whole stream matches the model
	fresh, _ := newModelEngine(c, sc.base)
	if err := fresh.Restore(snap[:len(snap)/2]); err == nil {
		t.Fatal("half a snapshot restored")
	}
	if f := runScenarioOn(fresh, sc); f != nil {
		t.Errorf("after a failed Restore: %s", f)
	}
}

// runScenarioOn runs sc on a given engine and checks verdicts, watermarks and per-window totals against
// the model (not the firings' detail, which TestEngineMatchesReferenceModel covers).
func runScenarioOn(e *Engine, sc *scenario) *runFailure {
	m := newRefModel(sc.cfg)
	tf := timeFmt{sc.base}
	totals := map[refWinID]uint64{}
	add := func(fs []firingRec) {
		for _, f := range fs {
			totals[refWinID{f.Agg, f.Key, f.Start}] += f.Count
		}
	}
	for i, op := range sc.ops {
		b := e.Begin(op.batchNow)
		mb := m.begin(op.batchNow)
		for j, r := range op.recs {
			if g, w := addRec(b, &r, []byte(r.key)), mb.addRec(r); g != w {
				return &runFailure{op: i, lines: []string{fmt.Sprintf("record %d: verdict %v, want %v", j, g, w)}}
			}
		}
		b.End()
		mb.end()
		add(collectFirings(e, op.collectNow))
		m.collect(op.collectNow)
		if g, w := e.Watermark(), m.watermark(); g != w {
			return &runFailure{op: i, lines: []string{fmt.Sprintf("Watermark() = %s, want %s", tf.t(g), tf.t(w))}}
		}
	}
	add(fireAllFirings(e))
	m.fireAll()
	for id, n := range m.added {
		if totals[id] != n {
			return &runFailure{op: len(sc.ops), final: true, lines: []string{fmt.Sprintf("window %+v: firings carried %d, %d added", id, totals[id], n)}}
		}
	}
	return nil
}

// TestBatchJudgedAgainstBeginWatermarkAcrossCollect: the contract judges every record of a batch against
// the W that held at its Begin. Collect may run between a batch's Begin and its Adds (ingest and Collect
// are concurrent), and may move W there (idle rule, or batches that ended meanwhile). The records added
// after it must still be judged against the Begin watermark.
func TestBatchJudgedAgainstBeginWatermarkAcrossCollect(t *testing.T) {
	// The contract as documented: a batch is judged against the watermark at its Begin, or a later one
	// when the watermark moved meanwhile (a Collect's idle rule, or another batch's records brought
	// the shards forward). Windows discarded in between are not resurrected.
	s := int64(time.Second)
	clk := clock.NewFake(time.Unix(0, realNow))
	e, err := New(Config{Size: 10 * time.Second, IdleTimeout: 5 * time.Second, MaxFutureSkew: time.Minute,
		Aggregations: []Aggregation{{MaxSeries: 10}}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	base := realNow - mod(realNow, 10*s) // a window start
	now := clk.Now()
	b := e.Begin(now)
	addOne(b, 0, []byte("a"), base+5*s, 1)
	b.End() // W = base+5s
	e.Collect(now, func(*Result) {})

	b = e.Begin(now)                      // begins at W = base+5s
	e.Collect(now+20*s, func(*Result) {}) // idle: W = base+25s; [base, base+10s) fires and is discarded
	got := []Verdict{
		addOne(b, 0, []byte("a"), base+7*s, 1),  // [base, base+10s) is gone: Expired
		addOne(b, 0, []byte("b"), base+27*s, 1), // [base+20s, base+30s): OnTime
	}
	b.End()
	if got[0] != Expired || got[1] != OnTime {
		t.Errorf("verdicts %v, want [expired on_time]: judged against the newer watermark; Watermark() now %s",
			got, timeFmt{base}.t(e.Watermark()))
	}
}

// TestStagedEqualsOneAtATimeWhenCollectedEveryBatch drives two engines with the same hash seed through the
// same overflow-heavy streams, one adding a record at a time, one staging each batch and applying it, and
// collecting after every batch: verdicts and firings (which series hold the max_series slots
// included) must be identical. Without a Collect per batch, or with W moving with the wall clock
// between a Collect and the next batch, they may differ in which new series get slots that expired
// series freed (see Batch): the wall clock keeps up with the records.
func TestStagedEqualsOneAtATimeWhenCollectedEveryBatch(t *testing.T) {
	s := time.Second
	configs := []modelConfig{
		{name: "tumbling", size: 10 * s, lateness: 5 * s, ooo: s, idle: 15 * s, skew: 30 * s, keys: 12, shards: 4,
			seeds: 40, ops: 40, maxSeries: 3, clockKeepsUp: true, aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "sliding", size: 4 * s, slide: s, lateness: 3 * s, skew: 30 * s, keys: 10, shards: 4,
			seeds: 40, ops: 30, maxSeries: 2, clockKeepsUp: true, aggs: []Aggregation{{Histogram: true}}},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(seedsFor(&c)) {
				sc := genScenario(&c, seed)
				ea, clkA := newModelEngine(&c, sc.base)
				eb, clkB := newModelEngine(&c, sc.base)
				eb.seed = ea.seed
				for i, op := range sc.ops {
					clkA.Set(time.Unix(0, op.batchNow))
					clkB.Set(time.Unix(0, op.batchNow))
					ba, bb := ea.Begin(op.batchNow), eb.Begin(op.batchNow)
					va, vb := applyRecords(ba, op.recs, false), applyRecords(bb, op.recs, true)
					ba.End()
					bb.End()
					if !slices.Equal(va, vb) {
						t.Fatalf("seed %d op %d: verdicts one at a time %v, staged %v", seed, i, va, vb)
					}
					fa, fb := collectFirings(ea, op.collectNow), collectFirings(eb, op.collectNow)
					if !reflect.DeepEqual(fa, fb) {
						t.Fatalf("seed %d op %d: firings differ\nAdd:    %+v\nstaged: %+v", seed, i, fa, fb)
					}
				}
			}
		})
	}
}

// TestFullPendingValuesOfAPaneInTheSlidingSketch holds the engine to the model on a stream that the
// random scenarios reach rarely: a series' head gathers pendingValues values, and inserts them, while
// its pane is in the range of the series' sliding-window sketch (a window holding the pane has fired,
// and with no allowed lateness the pane's records are still on time for the windows after it).
func TestFullPendingValuesOfAPaneInTheSlidingSketch(t *testing.T) {
	s := int64(time.Second)
	c := &modelConfig{name: "sliding4s/1s-full-pending", size: 4 * time.Second, slide: time.Second,
		skew: time.Minute, aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}}
	base := realNow
	p := base + 10*s // the pane the records go to
	rng := rand.New(rand.NewPCG(3, 5))
	inPane := func(n int) []refRec {
		var recs []refRec
		for i := range n {
			for agg := range 2 {
				recs = append(recs, refRec{agg: agg, key: "k", t: p + int64(i)*s/int64(n), v: math.Exp(3 + rng.NormFloat64())})
			}
		}
		return recs
	}
	sc := &scenario{cfg: c, seed: 0, base: base, ops: []scenOp{
		// Records in the two panes before p as well, so that the fired window merges several panes
		// and the series keeps a sliding-window sketch.
		{batchNow: base + 12*s, collectNow: base + 12*s, recs: append([]refRec{
			{agg: 0, key: "k", t: p - 2*s, v: 3}, {agg: 0, key: "k", t: p - s, v: 4}, {agg: 1, key: "k", t: p - s, v: 5},
		}, inPane(3*pendingValues+5)...)},
		// W passes p+1s: the window [p-3s, p+1s) fires, and the sliding sketch holds it.
		{batchNow: base + 12*s, collectNow: base + 12*s, recs: []refRec{{agg: 0, key: "k", t: p + 1500*time.Millisecond.Nanoseconds(), v: 1}}},
		// On time for the windows ending at p+2s, p+3s and p+4s: into the pane, and into the sketch.
		{batchNow: base + 12*s, collectNow: base + 12*s, recs: inPane(3*pendingValues + 7)},
		{batchNow: base + 30*s, collectNow: base + 30*s, recs: []refRec{{agg: 0, key: "k", t: base + 29*s, v: 2}}},
	}}
	for _, opt := range []runOptions{{}, {staged: true}} {
		if f := runScenario(sc, opt); f != nil {
			reportFailure(t, sc, opt, f)
		}
	}
}
