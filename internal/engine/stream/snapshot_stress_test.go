package stream

// A stress test of Snapshot taken while several goroutines ingest: every snapshot must restore, and
// hold, window by window, at least the records of the Applies that had returned before it began and at
// most those of the Applies that had begun before it returned (less what Collect had handed out); the
// results it holds pending must be ones that the live engine hands out at its next Collect; and once
// ingest stops, a snapshot must restore to exactly the live engine's state.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// stressTally counts records per (aggregation, tumbling window), under mu.
type stressTally struct {
	mu           sync.Mutex
	lower, upper map[aggWin]uint64 // Applies returned / Applies begun (less what they did not aggregate)
}

func (st *stressTally) copyLower() map[aggWin]uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.lower)
}

func (st *stressTally) copyUpper() map[aggWin]uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.upper)
}

// resultID is what identifies a Result and its numbers, for comparing firings of two engines.
type resultID struct {
	Agg        int
	Key        string
	Overflow   bool
	Start, End int64
	Late       bool
	HasWindow  bool
	HasPoint   bool
	Count      uint64
	ValueCount uint64
	Sum        float64
	PointCount uint64
}

func idOf(r *Result) resultID {
	return resultID{r.Agg, r.Key, r.Overflow, r.Start, r.End, r.late, r.HasWindow, r.HasPoint, r.Count, r.ValueCount, r.Sum, r.Point.Count}
}

func TestSnapshotDuringConcurrentIngest(t *testing.T) {
	for _, perSource := range []bool{false, true} {
		t.Run(fmt.Sprintf("perSource=%v", perSource), func(t *testing.T) {
			runSnapshotStress(t, perSource)
		})
	}
}

func runSnapshotStress(t *testing.T, perSource bool) {
	const s = int64(time.Second)
	const size = 10 * s
	clk := clock.NewFake(time.Unix(0, realNow))
	cfg := Config{Size: 10 * time.Second, AllowedLateness: 20 * time.Second, MaxOutOfOrderness: 2 * time.Second,
		IdleTimeout: 3 * time.Second, MaxFutureSkew: 10 * time.Second, shards: 16, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: 1000, Quantiles: fullQuantiles, Histogram: true}, {MaxSeries: 3}}}
	if perSource {
		cfg.PerSource, cfg.SourceIdleTimeout, cfg.MaxSources = true, 4*time.Second, 3
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(shards int, at int64) *Engine {
		c := cfg
		c.shards = shards
		c.Clock = clock.NewFake(time.Unix(0, at))
		e2, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		return e2
	}
	win := func(t int64) int64 { return t - mod(t, size) }

	tally := &stressTally{lower: map[aggWin]uint64{}, upper: map[aggWin]uint64{}}
	const workers = 4
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for !stop.Load() {
				// The clock moves during snapshots too, so that W does.
				now := clk.Advance(time.Duration(rng.IntN(20)) * time.Millisecond)
				b := e.Begin(now)
				staged := w%2 == 1
				var recs []refRec
				for range 1 + rng.IntN(30) {
					t := now - randIn(rng, -12*s, 40*s)
					if rng.IntN(50) == 0 {
						t = 0
					}
					agg := rng.IntN(2)
					keys := []int{100, 12}[agg] // agg 1 overflows its 3 series
					recs = append(recs, refRec{agg: agg, key: "k" + strconv.Itoa(rng.IntN(keys)), t: t, v: genValue(rng, nil, 5)})
				}
				if perSource {
					b.SetSource([]byte("src" + strconv.Itoa(w%3)))
				}
				// apply adds recs[lo:hi] to the tallies' upper bound, applies them (one Apply), and
				// moves what was aggregated to the lower bound.
				apply := func(lo, hi int) {
					got := make([]Verdict, hi-lo)
					tally.mu.Lock()
					for _, r := range recs[lo:hi] {
						if r.t > 0 {
							tally.upper[aggWin{r.agg, win(r.t)}]++
						}
					}
					tally.mu.Unlock()
					for j := lo; j < hi; j++ {
						r := recs[j]
						got[j-lo] = stageRec(b, &r, []byte(r.key), int32(j-lo))
					}
					b.Apply(func(tag int32, vd Verdict, _ int64) { got[tag] = vd })
					tally.mu.Lock()
					for j, vd := range got {
						r := recs[lo+j]
						if r.t <= 0 {
							continue
						}
						k := aggWin{r.agg, win(r.t)}
						if vd.Aggregated() {
							tally.lower[k]++
						} else {
							tally.upper[k]--
						}
					}
					tally.mu.Unlock()
				}
				if staged {
					apply(0, len(recs))
				} else {
					for j := range recs {
						apply(j, j+1)
						if rng.IntN(8) == 0 {
							runtime.Gosched()
						}
					}
				}
				b.End()
			}
		}()
	}

	collected := map[aggWin]uint64{}  // handed out by the live engine's Collects
	firstFired := map[windowID]bool{} // first firings handed out by the live engine
	var expectNext map[resultID]int   // pending results of the last snapshot: the next Collect hands them out
	var problems []string
	fail := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	liveCollect := func(now int64) {
		next := map[resultID]int{}
		e.Collect(now, func(r *Result) {
			next[idOf(r)]++
			if r.HasWindow {
				collected[aggWin{r.Agg, r.Start}] += r.Count
				if !r.late {
					id := windowID{r.Agg, r.Overflow, r.Key, r.Start}
					if firstFired[id] {
						fail("live: second first firing of %+v", id)
					}
					firstFired[id] = true
				}
			}
		})
		for id, n := range expectNext {
			if next[id] < n {
				fail("a snapshot held pending %d x %+v, the next Collect handed out %d", n, id, next[id])
			}
		}
		expectNext = nil
	}

	rng := rand.New(rand.NewPCG(99, 11))
	snapshots := 0
	for snapshots < 20 {
		now := clk.Advance(time.Duration(randIn(rng, 0, 400)) * time.Millisecond)
		if rng.IntN(25) == 0 {
			now = clk.Advance(5 * time.Second)
		}
		if rng.IntN(2) == 0 {
			liveCollect(now)
		}
		lower := tally.copyLower()
		snap := e.Snapshot(nil)
		upper := tally.copyUpper()
		liveW := e.Watermark()
		snapshots++

		// The restored engine's clock reads a time before every record, so that its W is the
		// snapshot's alone (with per-source tracking, a source heard from after the snapshot read the
		// sources, and so missing from it, could otherwise let it pass the snapshot's W).
		early := realNow - 3600*s
		e2 := fresh([]int{1, 3, 8, 64}[snapshots%4], early)
		if err := e2.Restore(snap); err != nil {
			t.Fatalf("snapshot %d (%d bytes) does not restore: %v", snapshots, len(snap), err)
		}
		if w2 := e2.Watermark(); w2 > liveW {
			fail("snapshot %d: restored W %d is past the live W %d read after it", snapshots, w2, liveW)
		}
		st := e2.Stats()
		for a, n := range st.ActiveSeries {
			if n > int64(cfg.Aggregations[a].MaxSeries) {
				fail("snapshot %d: agg%d restores %d series, max_series %d", snapshots, a, n, cfg.Aggregations[a].MaxSeries)
			}
		}
		restored := map[aggWin]uint64{}
		// At W the snapshot's, Collect hands out the results the snapshot held pending, and fires
		// nothing else.
		w2 := e2.Watermark()
		expectNext = map[resultID]int{}
		e2.Collect(early, func(r *Result) {
			expectNext[idOf(r)]++
			if r.HasWindow {
				restored[aggWin{r.Agg, r.Start}] += r.Count
				if !r.late && r.End > w2 {
					fail("snapshot %d: a pending first firing of a window ending at %d, past W %d", snapshots, r.End, w2)
				}
			}
		})
		e2.FireAll(func(r *Result) {
			if !r.HasWindow {
				return
			}
			restored[aggWin{r.Agg, r.Start}] += r.Count
			if id := (windowID{r.Agg, r.Overflow, r.Key, r.Start}); !r.late && firstFired[id] {
				fail("snapshot %d: restored engine first-fires %+v again", snapshots, id)
			}
		})
		keys := map[aggWin]bool{}
		for k := range restored {
			keys[k] = true
		}
		for k := range upper {
			keys[k] = true
		}
		for k := range keys {
			got := collected[k] + restored[k]
			if got < lower[k] || got > upper[k] {
				fail("snapshot %d: agg%d window %d: collected %d + restored %d = %d, outside [%d, %d]",
					snapshots, k.agg, (k.start-realNow)/s, collected[k], restored[k], got, lower[k], upper[k])
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	liveCollect(clk.Now())

	// Quiescent: a snapshot restores to exactly what the live engine holds.
	now := clk.Now()
	snap := e.Snapshot(nil)
	e2 := fresh(5, now)
	if err := e2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	var live, rest []resultID
	e.Collect(now, func(r *Result) { live = append(live, idOf(r)) })
	e.FireAll(func(r *Result) { live = append(live, idOf(r)) })
	e2.Collect(now, func(r *Result) { rest = append(rest, idOf(r)) })
	e2.FireAll(func(r *Result) { rest = append(rest, idOf(r)) })
	sortIDs := func(ids []resultID) {
		sort.Slice(ids, func(i, j int) bool { return fmt.Sprint(ids[i]) < fmt.Sprint(ids[j]) })
	}
	sortIDs(live)
	sortIDs(rest)
	if fmt.Sprint(live) != fmt.Sprint(rest) {
		fail("quiescent: the restored engine fires %d results, the live one %d, not the same", len(rest), len(live))
	}
	total := map[aggWin]uint64{}
	maps.Copy(total, collected)
	for _, id := range live {
		if id.HasWindow {
			total[aggWin{id.Agg, id.Start}] += id.Count
		}
	}
	lower, upper := tally.copyLower(), tally.copyUpper()
	maps.DeleteFunc(upper, func(_ aggWin, n uint64) bool { return n == 0 })
	if !maps.Equal(lower, upper) {
		t.Fatal("tallies differ at rest")
	}
	for k, n := range lower {
		if total[k] != n {
			fail("quiescent: agg%d window %d: fired %d records, %d aggregated", k.agg, (k.start-realNow)/s, total[k], n)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	var n uint64
	for _, v := range lower {
		n += v
	}
	t.Logf("%d snapshots, %d records aggregated", snapshots, n)
}
