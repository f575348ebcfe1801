package bench

// The heap benchmark: the live heap that window_aggregator holds per series, on batches of distinct
// series.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// heapBatches are 100 batches of 1000 spans, every span a series of its own: 10 services x 2500
// span names x 4 methods, all ending within the first 50 s of one minute (one window, nothing
// fires).
var heapBatches = sync.OnceValue(func() []ptrace.Traces {
	rng := rand.New(rand.NewPCG(42, 42))
	out := make([]ptrace.Traces, heapSeries/recordsPerBatch)
	names := make([]string, heapSeries/numServices/len(methods))
	for i := range names {
		names[i] = fmt.Sprintf("/api/v1/resource-%04d/{id}", i)
	}
	for bi := range out {
		td := ptrace.NewTraces()
		for s := 0; s < numServices; s++ {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", serviceNames[s])
			rs.Resource().Attributes().PutStr("telemetry.sdk.language", "go")
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for k := 0; k < recordsPerBatch/numServices; k++ {
				i := bi*recordsPerBatch + k*numServices + s // series number; i%10 == s
				sp := spans.AppendEmpty()
				sp.SetName(names[i/numServices/len(methods)])
				sp.SetKind(ptrace.SpanKindServer)
				end := baseTime + int64(i)*int64(500*time.Microsecond)
				sp.SetEndTimestamp(pcommon.Timestamp(end))
				sp.SetStartTimestamp(pcommon.Timestamp(end - latencyNanos(rng)))
				sp.Attributes().PutInt("http.response.status_code", 200)
				sp.Attributes().PutStr("http.request.method", methods[(i/numServices)%len(methods)])
			}
		}
		out[bi] = td
	}
	return out
})

// redrawDurations gives every span of the heap batches a new latency (same end time).
func redrawDurations(batches []ptrace.Traces, rng *rand.Rand) {
	for _, td := range batches {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				sp.SetStartTimestamp(sp.EndTimestamp() - pcommon.Timestamp(latencyNanos(rng)))
			}
		}
	}
}

// BenchmarkHeapPerSeries feeds 100k distinct series, values spans each, into one window and reports
// the live heap they add (HeapAlloc after runtime.GC, before and after) per series. One op is one
// whole fill; ns/op is not the point.
func BenchmarkHeapPerSeries(b *testing.B) {
	impls := []struct {
		name string
		make func(b *testing.B) *harness
	}{
		{"span_metrics", func(b *testing.B) *harness { return newSpanMetrics(b, smConfig(), nil) }},
		{"window_aggregator", func(b *testing.B) *harness {
			return newWindowAggregator(b, waConfig(waOptions{outputs: outputsPercentile, maxSeries: 2 * heapSeries}), nil)
		}},
	}
	for _, impl := range impls {
		for _, values := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("impl=%s/values=%d", impl.name, values), func(b *testing.B) {
				batches := heapBatches()
				rng := rand.New(rand.NewPCG(7, 7))
				ctx := context.Background()
				var total float64
				b.ReportAllocs()
				b.ResetTimer()
				for it := 0; it < b.N; it++ {
					b.StopTimer()
					h := impl.make(b)
					runtime.GC()
					runtime.GC()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					b.StartTimer()
					for v := 0; v < values; v++ {
						if v > 0 {
							b.StopTimer()
							redrawDurations(batches, rng)
							b.StartTimer()
						}
						for _, td := range batches {
							if err := h.traces.ConsumeTraces(ctx, td); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.StopTimer()
					runtime.GC()
					runtime.GC()
					runtime.ReadMemStats(&after)
					total += float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
					if h.clock == nil {
						outcomes, fired, active := h.waCounters(b)
						if outcomes["aggregated"] != int64(values*heapSeries) || fired != 0 || active != heapSeries {
							b.Errorf("window_aggregator: outcomes %v, fired %d, active series %d", outcomes, fired, active)
						}
					}
					runtime.KeepAlive(h)
					h.shutdown(b)
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(total/float64(b.N)/heapSeries, "heap-B/series")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*float64(values)*heapSeries), "ns/span")
			})
		}
	}
}
