package windowaggregator

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
)

// benchTraces builds batches of 1000 spans over 10 services x 20 span names x 4 methods (800 series),
// each batch one second of event time after the previous one.
func benchTraces(n int, start time.Time) []ptrace.Traces {
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	out := make([]ptrace.Traces, n)
	for b := range out {
		td := ptrace.NewTraces()
		end := start.Add(time.Duration(b) * time.Second)
		for svc := range 10 {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", svc))
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for i := range 100 {
				sp := spans.AppendEmpty()
				sp.SetName(fmt.Sprintf("GET /api/%d", i%20))
				sp.SetKind(ptrace.SpanKindServer)
				sp.Attributes().PutStr("http.request.method", methods[(i/20)%4]) // independent of the name
				sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-time.Duration(10+i%50) * time.Millisecond)))
				sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end.Add(time.Duration(i) * time.Millisecond)))
			}
		}
		out[b] = td
	}
	return out
}

// shiftSpans moves every span of td by d.
func shiftSpans(td ptrace.Traces, d pcommon.Timestamp) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		spans := rss.At(i).ScopeSpans().At(0).Spans()
		for k := 0; k < spans.Len(); k++ {
			sp := spans.At(k)
			sp.SetStartTimestamp(sp.StartTimestamp() + d)
			sp.SetEndTimestamp(sp.EndTimestamp() + d)
		}
	}
}

// BenchmarkConnectorTraces is the connector's cost per span through its factory, results included.
func BenchmarkConnectorTraces(b *testing.B) {
	for _, outputs := range [][]string{{"count", "sum", "histogram"}, {"count", "avg", "p50", "p95", "p99", "max"}} {
		b.Run(fmt.Sprint(outputs), func(b *testing.B) {
			cfg := createDefaultConfig().(*Config)
			cfg.Window.Size = time.Minute
			cfg.Emit.Interval = time.Hour
			cfg.Watermark.MaxFutureSkew = maxDuration
			cfg.Aggregations = []AggregationConfig{{Name: "http", Signal: "spans",
				GroupBy: keys("service.name", "span.name", "http.request.method"), Outputs: outputs}}
			set := connectortest.NewNopSettings(Type)
			c, err := NewConnectorFactory().CreateTracesToMetrics(context.Background(), set, cfg, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = c.Shutdown(context.Background()) }()
			// A minute of batches, moved a minute on at every lap (timer stopped), so that event time
			// keeps advancing without holding b.N batches in memory.
			batches := benchTraces(60, time.Unix(1_700_000_000, 0))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := i % len(batches)
				if j == 0 && i > 0 {
					b.StopTimer()
					for _, td := range batches {
						shiftSpans(td, pcommon.Timestamp(len(batches))*pcommon.Timestamp(time.Second))
					}
					b.StartTimer()
				}
				if err := c.ConsumeTraces(context.Background(), batches[j]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/span")
		})
	}
}

// BenchmarkBuildKey is the cost per span of reading its series key out of pdata ("walk" reads the same
// fields without building a key, for comparison): group_by service.name (resource), span.name and
// http.request.method.
func BenchmarkBuildKey(b *testing.B) {
	cfg := AggregationConfig{Name: "http", Signal: "spans", GroupBy: keys("service.name", "span.name", "http.request.method")}
	agg, err := compileAggregation(0, cfg, ingest.NewOTTLParsers(ingest.ValidationSettings))
	if err != nil {
		b.Fatal(err)
	}
	batches := benchTraces(60, time.Unix(1_700_000_000, 0))
	for _, build := range []bool{false, true} {
		name := "walk"
		if build {
			name = "build"
		}
		b.Run(name, func(b *testing.B) {
			var sa ingest.SignalAggs
			sa.Add(agg)
			r := ingest.GetSpanReader(&sa) // reads as ingest reads
			defer r.Release()
			var kb serieskey.Builder
			sink := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				rss := batches[i%len(batches)].ResourceSpans()
				for i := 0; i < rss.Len(); i++ {
					rs := rss.At(i)
					sss := rs.ScopeSpans()
					for j := 0; j < sss.Len(); j++ {
						ss := sss.At(j)
						r.SetScope(rs, ss)
						spans := ss.Spans()
						for k := 0; k < spans.Len(); k++ {
							r.Read(spans.At(k))
							if build {
								agg.BuildKey(&kb, &r.Record)
								sink += len(kb.Key())
							} else {
								v, _ := r.Attrs.Get("http.request.method")
								sink += len(v.Str()) + len(r.Field[ingest.FieldSpanName])
							}
						}
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/span")
			_ = sink
		})
	}
}

// checkpointed10k is a connector with storage holding 10k series with one open window each,
// [count, sum, p99], and its shared state.
func checkpointed10k(b *testing.B) (*memStorage, *shared, func(ptrace.Traces)) {
	clk := clock.NewFake(time.Unix(1000, 0))
	ctx := clock.NewContext(context.Background(), clk)
	cfg := latencyConfig()
	cfg.MaxSeries = 20000
	cfg.Storage = &storageID
	cfg.Checkpoint.Interval = time.Hour // saves come from the benchmark
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", GroupBy: keys("service.name", "span.name"), Outputs: []string{"count", "sum", "p99"}}}
	st := &memStorage{data: map[string][]byte{}}
	set := connectortest.NewNopSettings(Type)
	c, err := NewConnectorFactory().CreateTracesToMetrics(ctx, set, cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx, hostWith{storageID: st}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	consume := func(td ptrace.Traces) {
		if err := c.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	for svc := range 100 {
		var specs []spanSpec
		for op := range 100 {
			specs = append(specs, spanSpec{service: fmt.Sprint("svc-", svc), name: fmt.Sprint("/op/", op), end: 990, ms: float64(op)})
		}
		consume(traces(specs...))
	}
	var s *shared
	registryMu.Lock()
	for _, st := range registry {
		s = st
	}
	registryMu.Unlock()
	return st, s, consume
}

// BenchmarkCheckpoint10kSeries: one checkpoint (engine snapshot and encoding) of 10k series with one
// open window each, [count, sum, p99]; ingest waits on the engine's shards while the snapshot runs.
func BenchmarkCheckpoint10kSeries(b *testing.B) {
	st, s, _ := checkpointed10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.storage.Save(context.Background())
	}
	b.StopTimer()
	b.ReportMetric(float64(len(st.data[checkpoint.Key])), "checkpoint-bytes")
}

// BenchmarkIngestDuringCheckpoints: batches of 100 spans into the 10k series of
// BenchmarkCheckpoint10kSeries, with checkpoints saved back to back in another goroutine (with
// storage, one is taken at every firing); reports the ingest calls' p50, p99 and p99.9 and the
// checkpoints taken meanwhile. With checkpoints=off, the same without them.
func BenchmarkIngestDuringCheckpoints(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("checkpoints=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			_, s, consume := checkpointed10k(b)
			batches := make([]ptrace.Traces, 100)
			for i := range batches {
				var specs []spanSpec
				for op := range 100 {
					specs = append(specs, spanSpec{service: fmt.Sprint("svc-", i), name: fmt.Sprint("/op/", op), end: 991, ms: float64(op)})
				}
				batches[i] = traces(specs...)
			}
			stop, stopped := make(chan struct{}), make(chan struct{})
			saves := 0
			go func() {
				defer close(stopped)
				for on {
					select {
					case <-stop:
						return
					default:
					}
					s.storage.Save(context.Background())
					saves++
				}
			}()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				td := ptrace.NewTraces()
				batches[i%len(batches)].CopyTo(td)
				began := time.Now()
				consume(td)
				lat = append(lat, time.Since(began))
			}
			b.StopTimer()
			close(stop)
			<-stopped
			slices.Sort(lat)
			at := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Nanoseconds()) }
			b.ReportMetric(at(0.5), "p50-ns")
			b.ReportMetric(at(0.99), "p99-ns")
			b.ReportMetric(at(0.999), "p99.9-ns")
			b.ReportMetric(float64(saves), "checkpoints")
		})
	}
}

// BenchmarkBytesPerInputStream measures what a metrics aggregation keeps per cumulative input stream
// (the README's memory formula, term I): 20,000 pods' streams of a counter, of an explicit histogram
// of 10 bounds (the output's), and of an exponential histogram over a factor of 1000 at scale 3 (an
// output that keeps a sketch), each stream's point taken as its base. Heap after the points, less
// heap before, per stream; the engine holds one series.
func BenchmarkBytesPerInputStream(b *testing.B) {
	const streams = 20_000
	bounds := []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}
	for _, kind := range []inKind{inCounter, inCumulativeHistogram, inCumulativeExponential} {
		b.Run(map[inKind]string{inCounter: "counter", inCumulativeHistogram: "explicit", inCumulativeExponential: "exponential"}[kind], func(b *testing.B) {
			cfg := metricsConfig(AggregationConfig{Name: "m", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"m"}},
				Outputs: []string{"count", "sum", "histogram"}})
			if kind == inCumulativeHistogram {
				bs := make([]any, len(bounds))
				for i, v := range bounds {
					bs[i] = v
				}
				cfg.Aggregations[0].Histogram = &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: bs}}
			}
			cfg.MaxInputStreams = streams
			var batches []pmetric.Metrics
			for lo := 0; lo < streams; lo += 1000 {
				var pts []inPoint
				for i := lo; i < lo+1000; i++ {
					p := inPoint{service: "s", pod: fmt.Sprint("pod-", i), metric: "m", kind: kind, start: 900, t: 1001, v: 5}
					switch kind {
					case inCumulativeHistogram:
						p.hist = &inHist{count: 11, sum: 100, bounds: bounds, buckets: []uint64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}
					case inCumulativeExponential:
						counts := make([]uint64, 80) // 10 octaves at scale 3
						for j := range counts {
							counts[j] = 1
						}
						p.hist = &inHist{count: 80, sum: 1000, scale: 3, offset: 0, buckets: counts}
					}
					pts = append(pts, p)
				}
				batches = append(batches, inMetrics(pts...))
			}
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				set := connectortest.NewNopSettings(Type)
				set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
				c, err := NewConnectorFactory().CreateMetricsToMetrics(context.Background(), set, cfg, consumertest.NewNop())
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
					b.Fatal(err)
				}
				for _, md := range batches {
					if err := c.ConsumeMetrics(context.Background(), md); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/streams, "bytes/stream")
				if err := c.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
