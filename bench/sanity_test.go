package bench

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestSameResults feeds two minutes of the benchmark's batches (cycling through the ring and
// re-stamping it as the benchmarks do) to both connectors and checks that they count the same spans
// per series: the comparison is between equal work. It is not run by the benchmark command
// (-run '^$'); run it with `go test ./...`.
func TestSameResults(t *testing.T) { checkSameResults(t, traceRingFor(0)) }

// TestSameResultsSampled is TestSameResults on the same spans sampled at thresholds whose adjusted
// counts are whole (2, 4, 8, 1): both connectors count each span at its adjusted count, and agree
// series by series.
func TestSameResultsSampled(t *testing.T) {
	for _, mode := range []string{sampledPerService, sampledPerTrace} {
		t.Run(mode, func(t *testing.T) { checkSameResults(t, sampledTraceRing(mode)) })
	}
}

func checkSameResults(t *testing.T, r *traceRing) {
	waSink, smSink := new(consumertest.MetricsSink), new(consumertest.MetricsSink)
	// Delta on both sides, so that each window's counts compare with one flush's.
	wa := newWindowAggregator(t, waConfig(waOptions{outputs: outputsPercentile, delta: true}), waSink)
	sm := newSpanMetrics(t, smConfig(), smSink)
	ctx := context.Background()
	const minutes = 2
	for i := 0; i <= minutes*slotsPerMinute; i++ { // one batch more, to move the watermark past the 2nd minute
		j := i % r.n
		if j == 0 && i > 0 {
			for k := 0; k < r.n; k++ {
				r.setSlot(k, int64(i+k))
			}
		}
		for _, h := range []*harness{wa, sm} {
			if err := h.traces.ConsumeTraces(ctx, r.batches[j]); err != nil {
				t.Fatal(err)
			}
		}
		if (i+1)%slotsPerMinute == 0 {
			want := (i + 1) / slotsPerMinute
			sm.tick()
			deadline := time.Now().Add(10 * time.Second)
			for len(smSink.AllMetrics()) < want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := len(smSink.AllMetrics()); got != want {
				t.Fatalf("span_metrics flushed %d times, want %d", got, want)
			}
		}
	}
	// The windows fire and go out from the component's own goroutine, in requests of at most
	// emit.max_points_per_send points: wait for every point of both minutes.
	wantPoints := minutes * numServices * numSpanNames * len(methods) * len(outputsPercentile)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n := 0
		for _, md := range waSink.AllMetrics() {
			n += md.DataPointCount()
		}
		if n >= wantPoints {
			break
		}
	}
	outcomes, fired, _ := wa.waCounters(t)
	if outcomes["aggregated"] != int64(minutes*slotsPerMinute+1)*recordsPerBatch {
		t.Fatalf("window_aggregator outcomes %v", outcomes)
	}
	if fired == 0 {
		t.Fatal("window_aggregator fired no window")
	}
	wa.checkFired(t, int64(minutes*slotsPerMinute), 0) // every window closed, no span ahead of the clock

	// window_aggregator: count per (window start, series).
	waCounts := map[int64]map[string]int64{}
	for _, md := range waSink.AllMetrics() {
		forEachPoint(md, "http.server.latency.count", func(start int64, attrs pcommon.Map, v int64) {
			if waCounts[start] == nil {
				waCounts[start] = map[string]int64{}
			}
			waCounts[start][seriesOf(attrs)] += v
		})
	}
	// span_metrics: calls per (flush, series).
	var smCounts []map[string]int64
	for _, md := range smSink.AllMetrics() {
		m := map[string]int64{}
		forEachPoint(md, "traces.span.metrics.calls", func(_ int64, attrs pcommon.Map, v int64) {
			m[seriesOf(attrs)] += v
		})
		smCounts = append(smCounts, m)
	}
	if len(waCounts) != minutes || len(smCounts) != minutes {
		t.Fatalf("window_aggregator fired %d windows, span_metrics flushed %d times; want %d each", len(waCounts), len(smCounts), minutes)
	}
	for w := 0; w < minutes; w++ {
		start := baseTime + int64(w)*int64(time.Minute)
		waw, smw := waCounts[start], smCounts[w]
		var want int64 // the spans the minute's batches stand for
		for i := w * slotsPerMinute; i < (w+1)*slotsPerMinute; i++ {
			want += r.spansOf(i % r.n)
		}
		var total int64
		for k, v := range waw {
			total += v
			if smw[k] != v {
				t.Errorf("minute %d, series %s: window_aggregator %d, span_metrics %d", w, k, v, smw[k])
			}
		}
		if len(waw) != len(smw) || len(waw) != numServices*numSpanNames*len(methods) {
			t.Errorf("minute %d: window_aggregator %d series, span_metrics %d", w, len(waw), len(smw))
		}
		if total != want {
			t.Errorf("minute %d: %d spans counted, want %d", w, total, want)
		}
	}
	wa.shutdown(t)
	sm.shutdown(t)
}

func seriesOf(attrs pcommon.Map) string {
	s := ""
	for _, k := range spanGroupBy {
		v, _ := attrs.Get(k)
		s += v.AsString() + "|"
	}
	return s
}

func forEachPoint(md pmetric.Metrics, name string, fn func(start int64, attrs pcommon.Map, v int64)) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != name || m.Type() != pmetric.MetricTypeSum {
					continue
				}
				dps := m.Sum().DataPoints()
				for p := 0; p < dps.Len(); p++ {
					dp := dps.At(p)
					attrs := pcommon.NewMap()
					rm.Resource().Attributes().CopyTo(attrs)
					for k, v := range dp.Attributes().All() {
						v.CopyTo(attrs.PutEmpty(k))
					}
					fn(int64(dp.StartTimestamp()), attrs, dp.IntValue())
				}
			}
		}
	}
}

// TestSteadyIngestAllocatesNothing checks the claim behind the allocs/span figures: once its series
// exist and their sketches cover the values, window_aggregator takes a batch without allocating; what
// it allocates is the results of the windows that fire and the panes and sketches of new windows. Every batch here lies in the ring's first slots (within the first minute at
// the default rate), so no window fires while it measures (the sliding windows that end within
// those slots fire before).
// (The test runs here rather than in the component's package because that one runs with -race, where
// sync.Pool drops what it is given at random.)
func TestSteadyIngestAllocatesNothing(t *testing.T) {
	// The batches are fed again unchanged, which dedup would count as resends: it is off here (its
	// set grows with the spans it remembers, which pair=dedup_on_vs_off measures).
	for _, o := range []waOptions{{outputs: outputsSumHist, dedupOff: true}, {outputs: outputsPercentile, dedupOff: true},
		{outputs: outputsPercentile, slide: 15 * time.Second, dedupOff: true}} {
		t.Run(outputsName(o.outputs)+"/slide="+o.slide.String(), func(t *testing.T) {
			r := traceRingFor(0)
			r.reset()
			wa := newWindowAggregator(t, waConfig(o), nil)
			defer wa.shutdown(t)
			ctx := context.Background()
			feed := func(i int) {
				if err := wa.traces.ConsumeTraces(ctx, r.batches[i%r.n]); err != nil {
					t.Fatal(err)
				}
			}
			// Twice: a series inserts its values into its pane's sketch 32 at a time, so the values still
			// pending after the first pass reach the sketches in the second, which may grow them.
			for i := range 2 * r.n {
				feed(i)
			}
			_, firedBefore, _ := wa.waCounters(t)
			// Not testing.AllocsPerRun: it divides by the runs, so up to runs-1 allocations read as 0.
			// The same batches once more: no value falls outside a sketch's range and no counter passes
			// 255, so no sketch has to grow (growing allocates, once per series and window at most).
			batches := r.n
			// A garbage collection empties the sync.Pools that keep the batch buffers: the first batch
			// after it rebuilds them (about 60 allocations, once per collection). None runs here.
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			runtime.GC()
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			feed(0) // refills the pools the collection just emptied
			m0 := readMallocs()
			for i := range batches {
				feed(i)
			}
			// MemStats counts the whole process, and now and then a few allocations (1 to 3 in 60
			// batches, seen here) come from elsewhere; one allocation per batch would give 60.
			if allocs := readMallocs() - m0; allocs >= max(uint64(batches)/4, 4) {
				t.Errorf("%d allocations in %d batches of %d spans", allocs, batches, recordsPerBatch)
			}
			outcomes, fired, _ := wa.waCounters(t)
			if fired != firedBefore || outcomes["aggregated"] != int64(2*r.n+1+batches)*recordsPerBatch {
				t.Errorf("outcomes %v, %d windows fired while measuring; want every span aggregated and none fired",
					outcomes, fired-firedBefore)
			}
		})
	}
}
