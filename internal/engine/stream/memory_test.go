package stream

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// heapAfterFlood returns the live heap held by an engine after `keys` distinct keys flooded one window
// of an aggregation limited to maxSeries series, with latency-like values and percentiles.
func heapAfterFlood(t *testing.T, keys, maxSeries int) (bytes float64, st Stats) {
	t.Helper()
	bytes = heapHeldBy(func() any {
		e := floodEngine(t, keys, maxSeries)
		st = e.Stats()
		return e
	})
	return bytes, st
}

// heapHeldBy returns the live heap that what build makes holds, in bytes.
func heapHeldBy(build func() any) float64 {
	var before, after runtime.MemStats
	// Twice: what sync.Pools of earlier tests still hold is freed only by a second collection.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// floodEngine returns an engine after `keys` distinct keys flooded one window of an aggregation
// limited to maxSeries series.
func floodEngine(t *testing.T, keys, maxSeries int) *Engine {
	t.Helper()
	clk := clock.NewFake(time.Unix(1000, 0))
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
			// A held series gets records with a latency-like spread: pendingValues of them go into its
			// pane's sketch, and ten more wait in its pending values (see series.addToHead); the
			// others, bound for the overflow series, one each.
			records := 1
			if i < maxSeries {
				records = pendingValues + 10
			}
			for range records {
				addOne(b, 0, key, int64(500*time.Second)+int64(i%1000), math.Exp(3.7+0.6*rng.NormFloat64()))
			}
		}
		b.End()
	}
	return e
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

// A result's key may point into its series (see setKey), and whoever takes the results (the
// component's metrics, an exporter's queue) may keep it after the series is gone. What such a key
// keeps alive must be the series' few bytes, not its panes and sketches.
func TestKeysOfResultsOutliveTheirSeriesCheaply(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 20k series")
	}
	const keys = 20_000
	clk := clock.NewFake(time.Unix(1000, 0))
	e, err := New(Config{Size: time.Minute, Slide: 15 * time.Second, MaxFutureSkew: time.Hour, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: keys + 1, Quantiles: []float64{0.5, 0.99}, Histogram: true}}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	key := make([]byte, 0, 32)
	t0 := int64(500 * time.Second)
	for i := 0; i < keys; {
		b := e.Begin(clk.Now())
		for j := 0; j < 1000 && i < keys; j, i = j+1, i+1 {
			key = strconv.AppendInt(append(key[:0], "service-"...), int64(i), 10)
			for k := range 10 { // ten records per key, over two panes
				addOne(b, 0, key, t0+int64(k)*int64(3*time.Second), math.Exp(3.7+0.6*rng.NormFloat64()))
			}
		}
		b.End()
	}
	var dropped []weak.Pointer[series] // to check that the dropped series do go once nothing holds them
	for _, sh := range e.shards {
		for _, se := range sh.list {
			dropped = append(dropped, weak.Make(se))
		}
	}
	if len(dropped) != keys {
		t.Fatalf("%d series held, want %d", len(dropped), keys)
	}
	// A record far ahead moves the watermark past every window: all fire, and every series but the
	// last record's is dropped.
	b := e.Begin(clk.Now())
	if vd := addOne(b, 0, []byte("late-comer"), t0+int64(10*time.Minute), 1); vd != OnTime {
		t.Fatalf("the record ahead: %v", vd)
	}
	b.End()
	var held []string // the keys, as a consumer would hold them
	e.Collect(clk.Now(), func(r *Result) {
		if r.Key != "late-comer" && (len(held) == 0 || held[len(held)-1] != r.Key) {
			held = append(held, r.Key)
		}
	})
	if got := e.Stats().ActiveSeries[0]; got != 1 {
		t.Fatalf("%d series held after every window fired, want 1", got)
	}
	e.Collect(clk.Now(), func(*Result) {}) // empties the buffers the first Collect used
	if len(held) < keys {
		t.Fatalf("%d keys in the results of %d series", len(held), keys)
	}
	// What the keys keep alive: the heap with them, less the heap once they are let go.
	heap := func() float64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	with := heap()
	n := len(held)
	held = nil
	without := heap()
	for i, p := range dropped {
		if p.Value() != nil {
			t.Fatalf("dropped series %d is still alive once its results' keys are let go", i)
		}
	}
	runtime.KeepAlive(e)
	perSeries := (with - without) / keys
	t.Logf("%d results' keys of %d dropped series held: %.0f B per series", n, keys, perSeries)
	// The series the keys point into and the keys' string headers in held; not the series' panes and
	// sketches (about 600 bytes more with these values).
	if limit := float64(unsafe.Sizeof(series{})) + 96; perSeries > limit {
		t.Fatalf("the keys of results keep %.0f B per dropped series alive, want <= %.0f", perSeries, limit)
	}
}

// Adding a record to a series reads and writes its first two cache lines, which hold what finding it
// compares and its head, and the line of its next pending value (see series). That holds when every
// series starts on a cache line, as the engine allocates them, and those fields lie within its first
// 128 bytes: a field added to series may change its size, but must keep both.
func TestSeriesFindAndHeadOnItsFirstTwoCacheLines(t *testing.T) {
	const line = 64
	clk := clock.NewFake(time.Unix(1000, 0))
	e, err := New(Config{Size: time.Minute, MaxFutureSkew: time.Hour, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: 2000, Quantiles: []float64{0.5}}}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.Begin(clk.Now())
	for i := range 1000 {
		addOne(b, 0, []byte("service-"+strconv.Itoa(i)), int64(500*time.Second), float64(i))
	}
	b.End()
	n := 0
	for _, sh := range e.shards {
		for _, se := range sh.list {
			if a := uintptr(unsafe.Pointer(se)); a%line != 0 {
				t.Fatalf("a series of %d bytes at %#x, %d bytes into a cache line", unsafe.Sizeof(*se), a, a%line)
			}
			n++
		}
	}
	if n != 1000 {
		t.Fatalf("%d series, want 1000", n)
	}
	var se series
	hot := []struct {
		name      string
		off, size uintptr
	}{
		{"key", unsafe.Offsetof(se.key), unsafe.Sizeof(se.key)},
		{"keyBuf", unsafe.Offsetof(se.keyBuf), unsafe.Sizeof(se.keyBuf)},
		{"hash", unsafe.Offsetof(se.hash), unsafe.Sizeof(se.hash)},
		{"agg", unsafe.Offsetof(se.agg), unsafe.Sizeof(se.agg)},
		{"npending", unsafe.Offsetof(se.npending), unsafe.Sizeof(se.npending)},
		{"headStart", unsafe.Offsetof(se.headStart), unsafe.Sizeof(se.headStart)},
		{"head", unsafe.Offsetof(se.head), unsafe.Sizeof(se.head)},
	}
	for _, f := range hot {
		if end := f.off + f.size; end > 2*line {
			t.Errorf("series.%s ends at byte %d, want <= %d", f.name, end, 2*line)
		}
	}
}

// A pane's exemplars stay within the README's X, 210 + 55 × (k - 1) bytes, for k kept: measured as the
// heap that 5000 series, each with one pane of 40 spans, hold with k exemplars beyond what they hold
// without.
func TestPaneExemplarsWithinTheMemoryFormula(t *testing.T) {
	const nSeries = 5000
	// The least of three measures: what other goroutines allocate meanwhile only adds to one.
	heap := func(k int) float64 {
		least := math.Inf(1)
		for range 3 {
			least = min(least, heapHeldBy(func() any { return exemplarEngine(t, nSeries, k) })/nSeries)
		}
		return least
	}
	none := heap(0)
	for _, k := range []int{1, 5, 20} {
		got, limit := heap(k)-none, float64(210+55*(k-1))
		t.Logf("k=%d: %.0f bytes a pane, formula %.0f", k, got, limit)
		if got > limit {
			t.Errorf("k=%d: a pane's exemplars take %.0f bytes, the formula %.0f", k, got, limit)
		}
	}
}

// exemplarEngine returns an engine keeping k exemplars a point with nSeries series, each with one pane
// of 40 records that are spans.
func exemplarEngine(t *testing.T, nSeries, k int) *Engine {
	t.Helper()
	clk := clock.NewFake(time.Unix(1000, 0))
	e, err := New(Config{Size: time.Minute, MaxFutureSkew: time.Hour, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: nSeries, Exemplars: k}}})
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(0)
	b := e.Begin(clk.Now())
	for i := range nSeries {
		key := []byte("service-" + strconv.Itoa(i))
		for j := range 40 {
			n++
			trace, span := spanOf(n)
			b.StageChecked(&Record{Key: key, Time: int64(500*time.Second) + int64(j), Value: float64(j), TraceID: trace, SpanID: span})
		}
	}
	b.Apply(func(int32, Verdict, int64) {})
	b.End()
	return e
}
