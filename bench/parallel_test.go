package bench

// The parallel benchmarks: both connectors driven by b.RunParallel at GOMAXPROCS 1 and 2, and the
// cost of the re-stamping their loop adds to every batch.

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// runParallel runs the same loop with b.RunParallel at GOMAXPROCS=procs, every goroutine with a
// ring of its own. The goroutines take event-time slots from one counter, so that the event time
// stays ordered across them up to the few batches in flight, and re-stamp the batch they are about
// to send to its slot inside the timed loop (BenchmarkRestamp measures that cost; it is the same
// at every procs).
func runParallel(b *testing.B, procs int, h *harness, rings []*traceRing) uint64 {
	prev := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(prev)
	if procs > len(rings) {
		b.Fatalf("%d rings for %d goroutines", len(rings), procs)
	}
	var slots atomic.Int64
	var goroutine atomic.Int32
	ctx := context.Background()
	b.SetParallelism(1)
	m0 := readMallocs()
	meter := startCPUMeter()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rings[goroutine.Add(1)-1]
		j := 0
		for pb.Next() {
			s := slots.Add(1) - 1
			r.setSlot(j, s)
			if s > 0 && s%int64(slotsPerMinute) == 0 {
				h.tick()
			}
			if err := h.traces.ConsumeTraces(ctx, r.batches[j]); err != nil {
				b.Error(err)
				return
			}
			j++
			if j == r.n {
				j = 0
			}
		}
	})
	b.StopTimer()
	reportOtherCores(b, meter)
	return readMallocs() - m0
}

// parallelImpls are the connectors of the parallel benchmarks. window_aggregator runs with
// max_out_of_orderness 1m there (at every GOMAXPROCS), so that a batch overtaken by up to 60
// batches sent concurrently (its goroutine descheduled for a few ms on a busy machine) is still on
// time; it reports late_pct, the share of spans that were nevertheless not aggregated on time
// (dropped as expired, which is cheaper: the result is then slightly optimistic).
var parallelImpls = []struct {
	name string
	make func(b *testing.B) *harness
}{
	{"span_metrics", func(b *testing.B) *harness { return newSpanMetrics(b, smConfig(), nil) }},
	{"window_aggregator", func(b *testing.B) *harness {
		return newWindowAggregator(b, waConfig(waOptions{outputs: outputsPercentile, outOfOrder: time.Minute}), nil)
	}},
}

func reportLate(b *testing.B, h *harness, records int64) {
	if h.clock == nil && records > 0 {
		late := h.lateRecords(b, records)
		b.ReportMetric(100*float64(late)/float64(records), "late_pct")
	}
}

// BenchmarkParallel: both connectors driven by b.RunParallel at GOMAXPROCS 1 and 2, outputs
// [count, avg, p50, p95, p99, max] for window_aggregator. Compare with benchstat -col /procs;
// BenchmarkPaired measures the speed-up on a busy machine.
func BenchmarkParallel(b *testing.B) {
	for _, impl := range parallelImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			for _, procs := range []int{1, 2} {
				b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
					rings := []*traceRing{traceRingFor(0), traceRingFor(1)}
					h := impl.make(b)
					mallocs := runParallel(b, procs, h, rings)
					report(b, "span", mallocs)
					reportLate(b, h, int64(b.N)*recordsPerBatch)
					h.checkFired(b, int64(b.N)-1, 1)
					h.shutdown(b)
				})
			}
		})
	}
}

// BenchmarkRestamp measures what runParallel adds to every batch: moving its 1000 spans to a new
// event-time slot (two timestamp writes per span).
func BenchmarkRestamp(b *testing.B) {
	r := traceRingFor(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.setSlot(i%r.n, int64(i+r.n))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*recordsPerBatch), "ns/span")
}
