package stream

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/processor/clock"
)

// heapAfterFlood returns the live heap held by an engine after `keys` distinct keys flooded one window
// of an aggregation limited to maxSeries series, with latency-like values and percentiles.
func heapAfterFlood(t *testing.T, keys, maxSeries int) (bytes float64, st Stats) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1000, 0))
	var before, after runtime.MemStats
	// Twice: what sync.Pools of earlier tests still hold is freed only by a second collection.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	e, err := New(Config{Size: time.Minute, MaxFutureSkew: time.Hour, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: maxSeries, Quantiles: []float64{0.5, 0.95, 0.99}}}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	key := make([]byte, 0, 32)
	for i := 0; i < keys; {
		b := e.Begin(clk.Now())
		for j := 0; j < 1000 && i < keys; j, i = j+1, i+1 {
			key = strconv.AppendInt(append(key[:0], "service-"...), int64(i), 10)
			for range 10 { // ten records per key: a latency-like spread in each pane
				addOne(b, 0, key, int64(500*time.Second)+int64(i%1000), math.Exp(3.7+0.6*rng.NormFloat64()))
			}
		}
		b.End()
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	st = e.Stats()
	runtime.KeepAlive(e)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc), st
}

// Memory is bounded by max_series: flooding ten times more distinct keys holds no more heap, and each
// held series with its pane of latency-like data stays within 2 KiB.
func TestHeapIsBoundedByMaxSeriesUnderKeyFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods 100k keys")
	}
	const maxSeries = 2000
	small, st := heapAfterFlood(t, 10_000, maxSeries)
	if st.ActiveSeries[0] != maxSeries || !st.OverflowActive[0] {
		t.Fatalf("stats %+v", st)
	}
	large, _ := heapAfterFlood(t, 100_000, maxSeries)
	perSeries := large / (maxSeries + 1)
	t.Logf("heap: %.0f B after 10k keys, %.0f B after 100k keys: %.0f B per held series and pane", small, large, perSeries)
	if large > 1.5*small+64<<10 {
		t.Fatalf("heap grew with the flood: %.0f B for 10k keys, %.0f B for 100k", small, large)
	}
	if perSeries > 2048 {
		t.Fatalf("%.0f B per series and pane, want <= 2 KiB", perSeries)
	}
}
