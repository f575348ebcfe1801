package bench

// The paired benchmarks: two sides fed the same batches turn by turn in one benchmark, so that their
// ratio holds on a busy machine.

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// BenchmarkPaired measures the ratios the targets are about, robustly on a shared machine: one
// benchmark runs both sides of a comparison, alternating between them every minute of event time
// (the side that goes first alternates too) and timing each side on its own, so that
// both see the same load. b.N batches go to each side; ns/op, B/op and allocs/op are for one batch
// to each side and mean little; read the custom metrics:
//
//   - pair=window_aggregator_vs_span_metrics: span_metrics_ns/span, window_aggregator_ns/span,
//     their allocs/span, and x_span_metrics = span_metrics ns/span ÷ window_aggregator ns/span
//     (target >= 4);
//   - pair=sliding_vs_tumbling (window_aggregator, 1m/15s vs 1m): x_tumbling = sliding ns/span ÷
//     tumbling ns/span (target <= 1.25);
//   - pair=cumulative_vs_delta (window_aggregator at its default, cumulative with late records
//     folded, vs delta with late firings that revise): x_delta = cumulative ns/span ÷ delta ns/span
//     (target <= 1.10);
//   - pair=explicit_vs_exponential ([count, sum, histogram] only: explicit buckets, span_metrics'
//     default bounds, vs the exponential histogram): x_exponential = explicit ns/span ÷ exponential;
//   - pair=exemplars_window_aggregator_vs_span_metrics: the first pair with exemplars on for both
//     (5 a point): x_span_metrics as above;
//   - pair=exemplars_on_vs_off (window_aggregator): x_off = with exemplars ns/span ÷ without, what
//     the feature costs;
//   - pair=dedup_on_vs_off (window_aggregator): x_off = dedup enabled (the default) ns/span ÷
//     dedup.enabled: false, what remembering every span's identity costs (target <= 1.2);
//   - pair=sampled_window_aggregator_vs_span_metrics: both on the same spans sampled at thresholds in
//     their tracestates, each distinct (sampledPerTrace), both counting adjusted counts:
//     x_span_metrics as above;
//   - pair=weights_per_service_vs_none and pair=weights_per_trace_vs_none (window_aggregator, on
//     sampled spans whose tracestates are one per service, or all distinct): x_none = weight:
//     adjusted_count (the default) ns/span ÷ weight: none, what reading and weighing thresholds
//     costs;
//   - pair=ottl_condition_vs_plain, ottl_key_vs_plain, ottl_value_vs_plain (window_aggregator): the
//     same aggregation with one OTTL condition that every span meets, with http.request.method
//     computed by OTTL, or with the duration computed by OTTL, against the plain one: x_plain = with
//     OTTL ns/span ÷ plain ns/span, what each costs;
//   - pair=per_source_vs_global (window_aggregator, watermark.per_source [service.instance.id] vs no
//     per_source, on batches whose 10 services have 2 instances each taking turns batch by batch: 20
//     sources; turns of 60 batches): x_global = per_source ns/span ÷ global ns/span (target <= 1.05);
//   - pair=procs2_vs_procs1 (window_aggregator, [count, avg, p50, p95, p99, max]): two goroutines,
//     each with its own ring, at GOMAXPROCS 1 then 2; x_procs1 = throughput at 2 ÷ at 1 (target
//     >= 1.6). Its goroutines re-stamp every batch inside the timed part, as BenchmarkParallel's do.
//
// The first three pairs run at GOMAXPROCS 1 (the targets are per core). When span_metrics is one side,
// the garbage collection its allocations cause partly runs during window_aggregator's turns, which
// makes the ratio conservative for window_aggregator.
func BenchmarkPaired(b *testing.B) {
	for _, outputs := range [][]string{outputsSumHist, outputsPercentile} {
		b.Run("outputs="+outputsName(outputs), func(b *testing.B) {
			b.Run("pair=window_aggregator_vs_span_metrics", func(b *testing.B) {
				sides := []side{
					{name: "span_metrics", h: newSpanMetrics(b, smConfig(), nil)},
					{name: "window_aggregator", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
				}
				runPaired(b, traceRingFor(0), sides, slotsPerMinute)
				b.ReportMetric(sides[0].nsPerSpan(b)/sides[1].nsPerSpan(b), "x_span_metrics")
			})
			b.Run("pair=sliding_vs_tumbling", func(b *testing.B) {
				sides := []side{
					{name: "tumbling", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
					{name: "sliding", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs, slide: 15 * time.Second}), nil)},
				}
				runPaired(b, traceRingFor(0), sides, slotsPerMinute)
				b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_tumbling")
			})
			b.Run("pair=cumulative_vs_delta", func(b *testing.B) {
				sides := []side{
					{name: "delta", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs, delta: true}), nil)},
					{name: "cumulative", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
				}
				runPaired(b, traceRingFor(0), sides, slotsPerMinute)
				b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_delta")
			})
			b.Run("pair=exemplars_window_aggregator_vs_span_metrics", func(b *testing.B) {
				sides := []side{
					{name: "span_metrics", h: newSpanMetrics(b, smConfigWithExemplars(), nil)},
					{name: "window_aggregator", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs, exemplars: true}), nil)},
				}
				runPaired(b, traceRingFor(0), sides, slotsPerMinute)
				b.ReportMetric(sides[0].nsPerSpan(b)/sides[1].nsPerSpan(b), "x_span_metrics")
			})
			b.Run("pair=dedup_on_vs_off", func(b *testing.B) {
				sides := []side{
					{name: "off", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs, dedupOff: true}), nil)},
					{name: "on", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
				}
				runPaired(b, traceRingFor(0), sides, slotsPerMinute)
				b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_off")
			})
			b.Run("pair=exemplars_on_vs_off", func(b *testing.B) {
				sides := []side{
					{name: "off", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
					{name: "on", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs, exemplars: true}), nil)},
				}
				runPaired(b, traceRingFor(0), sides, slotsPerMinute)
				b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_off")
			})
			if outputsName(outputs) == outputsName(outputsSumHist) {
				b.Run("pair=explicit_vs_exponential", func(b *testing.B) {
					sides := []side{
						{name: "exponential", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
						{name: "explicit", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs, explicit: explicitBuckets}), nil)},
					}
					runPaired(b, traceRingFor(0), sides, slotsPerMinute)
					b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_exponential")
				})
			}
			b.Run("pair=sampled_window_aggregator_vs_span_metrics", func(b *testing.B) {
				sides := []side{
					{name: "span_metrics", h: newSpanMetrics(b, smConfig(), nil)},
					{name: "window_aggregator", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
				}
				runPaired(b, sampledTraceRing(sampledPerTrace), sides, slotsPerMinute)
				b.ReportMetric(sides[0].nsPerSpan(b)/sides[1].nsPerSpan(b), "x_span_metrics")
			})
			for _, mode := range []string{sampledPerService, sampledPerTrace} {
				b.Run("pair=weights_"+mode+"_vs_none", func(b *testing.B) {
					sides := []side{
						{name: "none", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs, weightNone: true}), nil)},
						{name: "adjusted_count", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
					}
					runPaired(b, sampledTraceRing(mode), sides, slotsPerMinute)
					b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_none")
				})
			}
			for _, o := range []struct {
				name string
				opts waOptions
			}{
				{"condition", waOptions{outputs: outputs, ottlCondition: true}},
				{"key", waOptions{outputs: outputs, ottlKey: true}},
				{"value", waOptions{outputs: outputs, ottlValue: true}},
			} {
				b.Run("pair=ottl_"+o.name+"_vs_plain", func(b *testing.B) {
					sides := []side{
						{name: "plain", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
						{name: "ottl", h: newWindowAggregator(b, waConfig(o.opts), nil)},
					}
					runPaired(b, traceRingFor(0), sides, slotsPerMinute)
					b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_plain")
				})
			}
			b.Run("pair=per_source_vs_global", func(b *testing.B) { runPairedPerSource(b, outputs) })
			if outputsName(outputs) == outputsName(outputsPercentile) {
				b.Run("pair=procs2_vs_procs1", runPairedProcs)
			}
		})
	}
}

// sourceInstances is the number of instances (service.instance.id) of every service in the
// per-source pair: 10 services, 20 sources.
const sourceInstances = 2

// runPairedPerSource is pair=per_source_vs_global: window_aggregator with watermark.per_source
// [service.instance.id] against the same configuration without it, both fed the ring whose services
// have sourceInstances instances taking turns batch by batch (the global side ignores the
// attribute). With per-source watermarks W is the least over the 20 sources, so it trails the
// greatest event time by one batch and windows fire one batch later.
func runPairedPerSource(b *testing.B, outputs []string) {
	if ringLen%sourceInstances != 0 {
		b.Skipf("BENCH_RING=%d: the per-source pair needs a multiple of %d", ringLen, sourceInstances)
	}
	perSource := newWindowAggregator(b, waConfig(waOptions{outputs: outputs, perSource: []string{"service.instance.id"}}), nil)
	perSource.lagSlots, perSource.instances = sourceInstances-1, sourceInstances
	sides := []side{
		{name: "global", h: newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)},
		{name: "per_source", h: perSource},
	}
	// Turns of one lap of the ring (60 batches; a minute of event time at the default rate, 1.2 s at
	// 50000 spans/s): neither side allocates much, and at 50000 spans/s turns of a minute (3000
	// batches) left the ratio at the mercy of the other processes' load (±15 to 25% over 8 runs).
	runPaired(b, traceRingOf(0, sourceInstances), sides, ringLen)
	b.ReportMetric(sides[1].nsPerSpan(b)/sides[0].nsPerSpan(b), "x_global")
}

// waSources returns window_aggregator's otelcol_window_aggregator_watermark_sources gauge.
func (h *harness) waSources(tb testing.TB) (n int64) {
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "otelcol_window_aggregator_watermark_sources" {
				for _, dp := range d.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// side is one side of a paired benchmark.
type side struct {
	name    string
	h       *harness
	elapsed time.Duration
	mallocs uint64
}

func (s *side) nsPerSpan(b *testing.B) float64 {
	return float64(s.elapsed.Nanoseconds()) / (float64(b.N) * recordsPerBatch)
}

// runPaired runs at GOMAXPROCS 1: the targets are per core, and on one core the garbage collector's
// work (span_metrics allocates 3 to 3.5 times per span) is paid on the core being measured instead of
// on an idle second one. The sides take turns of one minute of event time each (60 batches at the
// default rate, 3000 at 50000 spans/s), so that a garbage collection that one side's allocations
// started and the other side's turn finishes is a small part of a turn; with turns of 60 batches at
// 50000 spans/s, span_metrics' collections added about 70 ns/span to window_aggregator's turns.
// turnLen is the batches of a turn: slotsPerMinute, or fewer for a pair whose sides both allocate
// little (shorter turns share out the load of other processes more evenly).
func runPaired(b *testing.B, r *traceRing, sides []side, turnLen int) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := context.Background()
	meter := startCPUMeter()
	var ms runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	for done, turn := 0, 0; done < b.N; done, turn = done+turnLen, turn+1 {
		n := min(turnLen, b.N-done) // batches per side and turn
		for o := range sides {
			sd := &sides[(o+turn)%len(sides)]
			for lap := 0; lap < n; lap += r.n {
				m := min(r.n, n-lap)
				b.StopTimer()
				for k := 0; k < m; k++ {
					r.setSlot(k, int64(done+lap+k))
				}
				b.StartTimer()
				runtime.ReadMemStats(&ms)
				m0 := ms.Mallocs
				t0 := time.Now()
				for j := 0; j < m; j++ {
					if coldBytes > 0 { // each batch timed on its own, the eviction left out
						sd.elapsed += time.Since(t0)
						chill(&r.ring, j)
						t0 = time.Now()
					}
					if i := done + lap + j; i > 0 && i%slotsPerMinute == 0 {
						sd.h.tick()
					}
					if err := sd.h.traces.ConsumeTraces(ctx, r.batches[j]); err != nil {
						b.Fatal(err)
					}
				}
				sd.elapsed += time.Since(t0)
				runtime.ReadMemStats(&ms)
				sd.mallocs += ms.Mallocs - m0
			}
		}
	}
	b.StopTimer()
	reportOtherCores(b, meter)
	spans := float64(b.N) * recordsPerBatch
	for i := range sides {
		sd := &sides[i]
		b.ReportMetric(sd.nsPerSpan(b), sd.name+"_ns/span")
		b.ReportMetric(float64(sd.mallocs)/spans, sd.name+"_allocs/span")
		sd.h.checkAllAggregated(b, int64(b.N)*recordsPerBatch)
		sd.h.shutdown(b)
	}
}

// runPairedProcs alternates, every lap of the ring (60 batches) per goroutine, between GOMAXPROCS 1 and 2, with the
// same two goroutines feeding one window_aggregator from rings of their own.
func runPairedProcs(b *testing.B) {
	h := parallelImpls[1].make(b)
	rings := []*traceRing{traceRingFor(0), traceRingFor(1)}
	next := []int{0, 0}
	var slots atomic.Int64
	ctx := context.Background()
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	var elapsed [2]time.Duration // by GOMAXPROCS-1
	var fed [2]int64
	meter := startCPUMeter()
	b.ReportAllocs()
	b.ResetTimer()
	for done, lap := 0, 0; done < b.N; lap++ {
		for o := 0; o < 2 && done < b.N; o++ {
			procs := 1 + (o+lap)%2
			b.StopTimer()
			runtime.GOMAXPROCS(procs)
			b.StartTimer()
			n := min(ringLen, b.N-done) // batches per goroutine
			var wg sync.WaitGroup
			t0 := time.Now()
			for g := range rings {
				wg.Add(1)
				go func(r *traceRing, j int) {
					defer wg.Done()
					for k := 0; k < n; k++ {
						s := slots.Add(1) - 1
						r.setSlot(j, s)
						if err := h.traces.ConsumeTraces(ctx, r.batches[j]); err != nil {
							b.Error(err)
							return
						}
						if j++; j == r.n {
							j = 0
						}
					}
				}(rings[g], next[g])
				next[g] = (next[g] + n) % rings[g].n
			}
			wg.Wait()
			elapsed[procs-1] += time.Since(t0)
			fed[procs-1] += int64(n * len(rings))
			done += n
		}
	}
	b.StopTimer()
	reportOtherCores(b, meter)
	var nsPer [2]float64
	for p := range nsPer {
		nsPer[p] = float64(elapsed[p].Nanoseconds()) / (float64(fed[p]) * recordsPerBatch)
		b.ReportMetric(nsPer[p], fmt.Sprintf("procs%d_ns/span", p+1))
	}
	if fed[1] > 0 && fed[0] > 0 {
		b.ReportMetric(nsPer[0]/nsPer[1], "x_procs1")
	}
	reportLate(b, h, (fed[0]+fed[1])*recordsPerBatch)
	h.checkFired(b, fed[0]+fed[1]-1, 1)
	h.shutdown(b)
}
