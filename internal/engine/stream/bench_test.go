package stream

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// benchRecords is a stream of latency-like records over nSeries keys, in event-time order with a
// little disorder, spaced so that every series gets a few records per pane.
type benchRecords struct {
	keys   [][]byte
	offset []int64 // event-time offsets within a batch
	values []float64
}

func newBenchRecords(nSeries, n int) *benchRecords {
	rng := rand.New(rand.NewPCG(7, 9))
	br := &benchRecords{}
	for i := range nSeries {
		br.keys = append(br.keys, []byte("service-"+strconv.Itoa(i%10)+"/GET /api/item"+strconv.Itoa(i)))
	}
	for range n {
		br.offset = append(br.offset, rng.Int64N(int64(time.Second)))
		br.values = append(br.values, math.Exp(3.7+0.6*rng.NormFloat64()))
	}
	return br
}

func ignoreLate(int32, Verdict, int64) {}

// benchEngine feeds b.N records in batches of 1000, and collects after every batch as the component
// does. The stream is the same whatever the windows: ten records per second per series, at most ten
// thousand records per second in all (so 100k series get one record per ten seconds each). The wall
// clock keeps up with the records' event time, as in a collector, so that the watermark follows them.
// It reports ns and allocs per record, window firings included. Batches are staged and applied, as the
// component sends them. With exemplars > 0 the aggregation keeps that many a point, and every record
// comes with span ids of its own; with weight > 1 every record has that weight.
func benchEngine(b *testing.B, size, slide time.Duration, nSeries, exemplars int, weight uint32) {
	const batch = 1000
	t := int64(time.Second)
	clk := clock.NewFake(time.Unix(0, t))
	e, err := New(Config{Size: size, Slide: slide, MaxFutureSkew: 1000 * time.Hour, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: nSeries + 1, Quantiles: []float64{0.5, 0.95, 0.99}, Exemplars: exemplars}}})
	if err != nil {
		b.Fatal(err)
	}
	br := newBenchRecords(nSeries, batch)
	var rec Record
	var spans uint64
	var results int
	sink := func(r *Result) { results++ }
	// Event time per batch.
	step := int64(time.Second) * batch / int64(min(10*nSeries, 10_000))
	k := 0
	feed := func(n int) {
		for done := 0; done < n; {
			clk.Set(time.Unix(0, t+step)) // the end of the batch's event times
			bt := e.Begin(clk.Now())
			for i := 0; i < batch && done < n; i, done = i+1, done+1 {
				if exemplars == 0 && weight <= 1 {
					stage(bt, 0, br.keys[k], t+br.offset[i]%step, br.values[i], int32(i))
				} else {
					rec = Record{Key: br.keys[k], Time: t + br.offset[i]%step, Value: br.values[i], Tag: int32(i), Weight: weight}
					if exemplars > 0 {
						spans++
						binary.LittleEndian.PutUint64(rec.TraceID[:], spans)
						binary.LittleEndian.PutUint64(rec.SpanID[:], spans)
					}
					bt.StageChecked(&rec)
				}
				if k++; k == len(br.keys) {
					k = 0
				}
			}
			bt.Apply(ignoreLate)
			bt.End()
			t += step
			if e.Due(clk.Now()) {
				e.Collect(clk.Now(), sink)
			}
		}
	}
	// Warm up: every series has live panes and the pools are full, as in steady state.
	feed(max(2*nSeries, int(int64(size+2*slide)/step)*batch))
	b.ReportAllocs()
	b.ResetTimer()
	feed(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	if results == 0 {
		b.Fatal("no window fired: the stream did not move the watermark")
	}
}

func BenchmarkIngest(b *testing.B) {
	for _, w := range []struct {
		name        string
		size, slide time.Duration
	}{
		{"tumbling", time.Minute, time.Minute},
		{"sliding4", time.Minute, 15 * time.Second},
		{"sliding60", time.Minute, time.Second},
	} {
		for _, n := range []int{1, 1000, 100_000} {
			b.Run(fmt.Sprintf("%s/series=%d", w.name, n), func(b *testing.B) { benchEngine(b, w.size, w.slide, n, 0, 1) })
		}
	}
}

// BenchmarkIngestExemplars is BenchmarkIngest's tumbling case with 5 exemplars a point, against
// none in the same run.
func BenchmarkIngestExemplars(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		for _, k := range []int{0, 5} {
			b.Run(fmt.Sprintf("series=%d/exemplars=%d", n, k), func(b *testing.B) { benchEngine(b, time.Minute, time.Minute, n, k, 1) })
		}
	}
}

// BenchmarkIngestWeights is BenchmarkIngest's tumbling case with every record of weight 4 (a span
// sampled at 25%), against weight 1 in the same run.
func BenchmarkIngestWeights(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		for _, w := range []uint32{1, 4} {
			b.Run(fmt.Sprintf("series=%d/weight=%d", n, w), func(b *testing.B) { benchEngine(b, time.Minute, time.Minute, n, 0, w) })
		}
	}
}

// BenchmarkBytesPerSeries reports the heap held per series with one pane of 20 latency-like values
// and three percentiles.
func BenchmarkBytesPerSeries(b *testing.B) {
	const nSeries = 10_000
	for range b.N {
		clk := clock.NewFake(time.Unix(1000, 0))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		e, _ := New(Config{Size: time.Minute, MaxFutureSkew: time.Hour, Clock: clk,
			Aggregations: []Aggregation{{MaxSeries: nSeries, Quantiles: []float64{0.5, 0.95, 0.99}}}})
		br := newBenchRecords(nSeries, 20)
		bt := e.Begin(clk.Now())
		for _, key := range br.keys {
			for i := range br.values {
				addOne(bt, 0, key, 500*int64(time.Second), br.values[i])
			}
		}
		bt.End()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/nSeries, "bytes/series")
		runtime.KeepAlive(e)
	}
}

// BenchmarkIngestParallel ingests from every core at once (run with -cpu 1,2 to compare): each
// goroutine sends its own batches of 1000 records over 1000 series, tumbling 1m. The wall clock keeps
// up with the greatest event time sent. It reports the windows fired, which takes a minute of event
// time: some 600 batches per goroutine.
func BenchmarkIngestParallel(b *testing.B) {
	clk := clock.NewFake(time.Unix(1, 0))
	e, err := New(Config{Size: time.Minute, MaxFutureSkew: 1000 * time.Hour, Clock: clk,
		Aggregations: []Aggregation{{MaxSeries: 1 << 20, Quantiles: []float64{0.5, 0.95, 0.99}}}})
	if err != nil {
		b.Fatal(err)
	}
	var clockMu sync.Mutex
	keepUp := func(t int64) {
		clockMu.Lock()
		if clk.Now() < t {
			clk.Set(time.Unix(0, t))
		}
		clockMu.Unlock()
	}
	var next, fired atomic.Int64
	var emitting sync.Mutex // the component's emitter lock: an ingest call that finds it taken skips
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1)
		br := newBenchRecords(1000, 1000)
		for i := range br.keys {
			br.keys[i] = append(br.keys[i], byte(id))
		}
		t, k := int64(time.Second), 0
		sink := func(*Result) { fired.Add(1) }
		for {
			keepUp(t + int64(100*time.Millisecond)) // the end of the batch's event times
			bt := e.Begin(clk.Now())
			for i := range 1000 {
				if !pb.Next() {
					bt.Apply(ignoreLate)
					bt.End()
					return
				}
				stage(bt, 0, br.keys[k], t+br.offset[i]%int64(100*time.Millisecond), br.values[i], int32(i))
				k = (k + 1) % len(br.keys)
			}
			bt.Apply(ignoreLate)
			bt.End()
			t += int64(100 * time.Millisecond)
			if e.Due(clk.Now()) {
				if emitting.TryLock() { // as the component does: no waiting for another emission
					e.Collect(clk.Now(), sink)
					emitting.Unlock()
				}
			}
		}
	})
	b.ReportMetric(float64(fired.Load()), "firings")
}
