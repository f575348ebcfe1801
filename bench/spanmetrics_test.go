// Package bench compares the window_aggregator connector with contrib's span_metrics connector on
// the same pre-built batches. It is a module of its own so that the component's go.mod never depends
// on collector-contrib. See README.md for the command and how to compare runs with benchstat.
//
// This file holds the serial benchmarks (traces, sliding windows, logs, and the read-only baseline)
// and their loop; workload_test.go the batches, components_test.go the two connectors' setups and
// what the benchmarks report, parallel_test.go, paired_test.go and heap_test.go the other families,
// and sanity_test.go the test that both connectors count the same.
package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/view"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// runSerial feeds batch i%len(ring) for i < b.N from one goroutine. The ring is re-stamped once per
// lap, with the timer stopped, so that the event time (and window_aggregator's watermark) keeps
// advancing one second per batch.
func runSerial(b *testing.B, h *harness, r *ring, feed func(ctx context.Context, i int) error) uint64 {
	ctx := context.Background()
	m0 := readMallocs()
	meter := startCPUMeter()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % r.n
		if j == 0 && i > 0 {
			b.StopTimer()
			for k := 0; k < r.n; k++ {
				r.setSlot(k, int64(i+k))
			}
			b.StartTimer()
		}
		if i > 0 && i%slotsPerMinute == 0 {
			h.tick()
		}
		if coldBytes > 0 && r.touch != nil {
			b.StopTimer()
			chill(r, j)
			b.StartTimer()
		}
		if err := feed(ctx, j); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportOtherCores(b, meter)
	return readMallocs() - m0
}

func outputsName(outputs []string) string { return strings.Join(outputs, "_") }

// serialTraces runs h on the serial loop over trace ring 0 and reports per span.
func serialTraces(b *testing.B, h *harness) {
	r := traceRingFor(0)
	mallocs := runSerial(b, h, &r.ring, func(ctx context.Context, i int) error {
		return h.traces.ConsumeTraces(ctx, r.batches[i])
	})
	report(b, "span", mallocs)
}

// serialWindowAggregator runs window_aggregator configured by o on the serial loop, over log ring 0
// with o.logs and trace ring 0 otherwise, and checks that it aggregated every record on time.
func serialWindowAggregator(b *testing.B, o waOptions) {
	h := newWindowAggregator(b, waConfig(o), nil)
	defer pollView(b)()
	if o.logs {
		r := logRingFor(0)
		mallocs := runSerial(b, h, &r.ring, func(ctx context.Context, i int) error {
			return h.logs.ConsumeLogs(ctx, r.batches[i])
		})
		report(b, "log", mallocs)
	} else {
		serialTraces(b, h)
	}
	h.checkAllAggregated(b, int64(b.N)*recordsPerBatch)
	h.shutdown(b)
}

// BenchmarkTracesToMetrics: window_aggregator vs span_metrics on one goroutine, per output set.
// Compare the impl= columns with benchstat -col /impl; BenchmarkPaired measures the ratio on a
// busy machine.
func BenchmarkTracesToMetrics(b *testing.B) {
	for _, outputs := range [][]string{outputsSumHist, outputsPercentile} {
		b.Run("outputs="+outputsName(outputs), func(b *testing.B) {
			b.Run("impl=span_metrics", func(b *testing.B) {
				h := newSpanMetrics(b, smConfig(), nil)
				serialTraces(b, h)
				h.shutdown(b)
			})
			b.Run("impl=window_aggregator", func(b *testing.B) {
				serialWindowAggregator(b, waOptions{outputs: outputs})
			})
		})
	}
}

// BenchmarkAccumulatorOutputs: what the outputs kept in accumulators (stddev and stdvar, a
// distinct count of trace ids, every span its own) cost per span, against the same aggregation
// without them, outputs=count_avg; rate, which keeps no state, for comparison. Compare the columns
// with benchstat -col /outputs.
func BenchmarkAccumulatorOutputs(b *testing.B) {
	for _, outputs := range [][]string{{"count", "avg"}, {"count", "avg", "stddev", "stdvar"}, {"count", "avg", "distinct:trace_id"}, {"count", "avg", "rate"}} {
		b.Run("outputs="+outputsName(outputs), func(b *testing.B) {
			serialWindowAggregator(b, waOptions{outputs: outputs})
		})
	}
}

// BenchmarkSliding: window_aggregator with 1m windows sliding by 15s (4 panes per window, every
// record in 4 windows, 4x the firings) vs its own 1m tumbling windows. Compare with benchstat
// -col /window; BenchmarkPaired measures the ratio on a busy machine.
func BenchmarkSliding(b *testing.B) {
	for _, outputs := range [][]string{outputsSumHist, outputsPercentile} {
		b.Run("outputs="+outputsName(outputs), func(b *testing.B) {
			for _, w := range windowShapes {
				b.Run("window="+w.name, func(b *testing.B) {
					serialWindowAggregator(b, waOptions{outputs: outputs, slide: w.slide})
				})
			}
		})
	}
}

var windowShapes = []struct {
	name  string
	slide time.Duration
}{{"tumbling_1m", 0}, {"sliding_1m_15s", 15 * time.Second}}

// BenchmarkLogsToMetrics: window_aggregator logs->metrics on 1000-log batches, grouped by
// service.name and severity.text, with [count, sum, p99] of http.response.body.size. span_metrics
// takes no logs; contrib's count connector is not served at v0.165.1, so there is no comparison.
func BenchmarkLogsToMetrics(b *testing.B) {
	b.Run("impl=window_aggregator", func(b *testing.B) {
		serialWindowAggregator(b, waOptions{outputs: []string{"count", "sum", "p99"}, logs: true})
	})
}

// BenchmarkReadOnly is a baseline, not a connector: the serial loop reading, from every batch, what
// window_aggregator reads to aggregate a span and nothing else: for each group-by key the span's
// attributes first, then (once per scope) the scope's and the resource's; the span's name; its
// timestamps. BenchmarkTracesToMetrics' window_aggregator time minus this one's is the component's
// own work: grouping, windowing and output.
func BenchmarkReadOnly(b *testing.B) {
	r := traceRingFor(0)
	var h harness // no clock: nothing to flush
	mallocs := runSerial(b, &h, &r.ring, func(_ context.Context, i int) error {
		readSink += readSpans(r.batches[i])
		return nil
	})
	report(b, "span", mallocs)
}

// readSink keeps what BenchmarkReadOnly read, so that the reads cannot be optimized away.
var readSink int

// readSpans reads the fields that the benchmarks' aggregation groups and measures by, where
// window_aggregator looks for them.
func readSpans(td ptrace.Traces) (n int) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			service, ok := ss.Scope().Attributes().Get("service.name")
			if !ok {
				service, _ = rs.Resource().Attributes().Get("service.name")
			}
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				attrs := sp.Attributes()
				s := service
				if v, ok := attrs.Get("service.name"); ok {
					s = v
				}
				method, _ := attrs.Get("http.request.method")
				n += len(s.Str()) + len(sp.Name()) + len(method.Str()) + int(sp.EndTimestamp()-sp.StartTimestamp())
			}
		}
	}
	return n
}

// pollView reads the operator's view every BENCH_VIEW_POLL (a duration, such as 1s) while the
// benchmark runs, as the extension with a page left open does: the history's reading
// (view.Samples), the components (Views, what GET /api/v1/components serves), and the
// explainer asked about the first series listed, whose values the component then keeps; it returns
// what stops it. Without BENCH_VIEW_POLL nobody looks. Compare runs with and without it
// (bench/README.md, "The operator's view").
func pollView(b *testing.B) (stop func()) {
	every, err := time.ParseDuration(os.Getenv("BENCH_VIEW_POLL"))
	if err != nil || every <= 0 {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	polls, explained := 0, 0 // explained: the explainer's answers
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				view.Samples()
				for _, v := range view.Views(20) {
					if len(v.Aggregations) > 0 && len(v.Aggregations[0].TopSeries) > 0 {
						a := v.Aggregations[0]
						if _, err := view.Explain(v.ID, a.Name, a.TopSeries[0].Series); err == nil {
							explained++
						}
					}
				}
				polls++
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		b.ReportMetric(float64(polls), "view_polls")
		b.ReportMetric(float64(explained), "view_explains")
	}
}
