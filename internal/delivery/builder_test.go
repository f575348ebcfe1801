package delivery

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
	"github.com/windowaggregator/windowaggregator/internal/engine/sketch"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// BenchmarkBuilder is the cost of turning one window's results into pdata: 800 series (10
// services from the resource x 20 span names x 4 methods) with [count, avg, p50, p95, p99, max], then
// with [count, sum, histogram]. It reports ns and allocs per series.
func BenchmarkBuilder(b *testing.B) {
	for _, outputs := range [][]string{{"count", "avg", "p50", "p95", "p99", "max"}, {"count", "sum", "histogram"}} {
		b.Run(fmt.Sprint(outputs), func(b *testing.B) {
			agg := testAggregation(b, "http", outputs...)
			agg.GroupBy = []string{"service.name", "span.name", "http.request.method"}
			hist := sketch.New(sketch.DefaultScale, sketch.DefaultMaxBuckets)
			for i := range 100 {
				hist.Insert(float64(1 + i*i))
			}
			var results []stream.Result
			var kb serieskey.Builder
			for svc := range 10 {
				for name := range 20 {
					for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
						kb.Reset()
						kb.Str(serieskey.Resource, fmt.Sprintf("service-%02d", svc))
						kb.Str(serieskey.Record, fmt.Sprintf("/api/v1/resource-%02d/{id}", name))
						kb.Str(serieskey.Record, m)
						r := stream.Result{Key: string(kb.Key()), Start: 60e9, End: 120e9, Count: 75, Sum: 4000,
							ValueCount: 75, WindowValueCount: 75, Avg: 53, Min: 1, Max: 900, Quantiles: []float64{40, 300, 800},
							HasWindow: true, HasPoint: true, Point: stream.Point{Start: 60e9, Count: 75, ValueCount: 75, Sum: 4000}}
						if Has(agg.Outputs, Histogram) {
							r.Hist, r.Point.Hist = hist, hist
						}
						results = append(results, r)
					}
				}
			}
			mb := newBuilder([]*Aggregation{agg}, "bench", pmetric.AggregationTemporalityCumulative, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for i := range results {
					mb.add(&results[i])
				}
				mb.take()
			}
			n := float64(b.N * len(results))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/series")
		})
	}
}
