package windowaggregator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
)

type processorHarness struct {
	traces     processor.Traces
	metrics    processor.Metrics
	tracesOut  *consumertest.TracesSink
	metricsOut *consumertest.MetricsSink
	tel        *componenttest.Telemetry
}

func newProcessorHarness(t *testing.T, cfg *Config, next *consumertest.MetricsSink) *processorHarness {
	t.Helper()
	f := NewFactory()
	set := processortest.NewNopSettings(Type)
	h := &processorHarness{tracesOut: new(consumertest.TracesSink), metricsOut: next, tel: componenttest.NewTelemetry()}
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	var err error
	h.traces, err = f.CreateTraces(testContext(t), set, cfg, h.tracesOut)
	must(t, err)
	h.metrics, err = f.CreateMetrics(testContext(t), set, cfg, next)
	must(t, err)
	must(t, h.metrics.Start(context.Background(), componenttest.NewNopHost()))
	must(t, h.traces.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() {
		_ = h.traces.Shutdown(context.Background())
		_ = h.metrics.Shutdown(context.Background())
	})
	return h
}

func TestProcessorPassesRecordsAndMetricsOnAndAddsResults(t *testing.T) {
	useFakeClock(t)
	h := newProcessorHarness(t, latencyConfig(), new(consumertest.MetricsSink))
	td := traces(spanSpec{service: "a", name: "/x", end: 1, ms: 10}, spanSpec{service: "a", name: "/x"})
	must(t, h.traces.ConsumeTraces(context.Background(), td))
	must(t, h.traces.ConsumeTraces(context.Background(), traces(spanSpec{service: "a", name: "/x", end: 12, ms: 1})))
	if h.tracesOut.SpanCount() != 3 {
		t.Fatalf("passed on %d spans, want all 3, the invalid one included", h.tracesOut.SpanCount())
	}
	if h.tracesOut.AllTraces()[0] != td {
		t.Fatal("the batch passed on is not the one received")
	}
	incoming := pmetric.NewMetrics()
	incoming.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("other")
	settleAll(t)
	must(t, h.metrics.ConsumeMetrics(context.Background(), incoming))
	ps := points(h.metricsOut.AllMetrics())
	wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 1)
	all := h.metricsOut.AllMetrics()
	if all[len(all)-1] != incoming {
		t.Fatal("incoming metrics not passed on")
	}
	wantCounter(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "invalid", "action": "passed"}, 1)
}

func TestProcessorWithoutMetricsPipelineFailsToStart(t *testing.T) {
	f := NewFactory()
	set := processortest.NewNopSettings(Type)
	tp, err := f.CreateTraces(testContext(t), set, latencyConfig(), consumertest.NewNop())
	must(t, err)
	defer func() { _ = tp.Shutdown(context.Background()) }()
	err = tp.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), "no metrics pipeline") {
		t.Fatalf("Start = %v, want an error saying no metrics pipeline takes the results", err)
	}
}

func TestRetryableEmitErrorKeepsResultsUntilTheConsumerRecovers(t *testing.T) {
	useFakeClock(t)
	next := &flakyMetrics{err: errors.New("backend down")}
	cfg := latencyConfig()
	cfg.Emit.MaxPendingPoints, cfg.Emit.MaxPointsPerSend = 14, 7 // two windows' 7 points; one request each
	h := newConnectorHarnessTo(t, cfg, next)
	for i := range 4 { // each batch fires one window: 4 result batches, 2 kept
		h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: float64(10*i + 1), ms: 1}, spanSpec{service: "a", name: "/x", end: float64(10*i + 10), ms: 1}))
	}
	st := lookup(t)
	if n := st.emitter.Pending(); n != 14 {
		t.Fatalf("%d points pending, want the 2 batches of 7 that emit.max_pending_points = 14 holds", n)
	}
	if n, _ := gaugeValue(t, h.tel, "otelcol_window_aggregator_pending_points", "", ""); n != 14 {
		t.Fatalf("pending_points gauge reads %v, want 14", n)
	}
	next.setErr(nil)
	st.emit(context.Background(), true) // a retry, past the backoff
	ps := points(next.sink.AllMetrics())
	// Windows [0,10) ({1}) and [10,20) were dropped when the queue was full; [20,30) ({20, 21}) and
	// [30,40) ({30, 31}) are delivered.
	if n := len(find(ps, "lat.count", attrsAX)); n != 2 {
		t.Fatalf("delivered %d windows, want 2: %+v", n, ps)
	}
	wantPoint(t, ps, "lat.count", attrsAX, 20, 30, 2)
	wantPoint(t, ps, "lat.count", attrsAX, 30, 40, 2)
	// The two dropped windows, one series, 7 outputs each.
	if got := counterValue(t, h.tel, "otelcol_window_aggregator_dropped_points", map[string]string{"reason": "queue_full"}); got != 14 {
		t.Fatalf("queue-full drops counted %d, want 14", got)
	}
}

func TestPermanentEmitErrorDropsAndCounts(t *testing.T) {
	useFakeClock(t)
	next := &flakyMetrics{err: consumererror.NewPermanent(errors.New("bad data"))}
	h := newConnectorHarnessTo(t, latencyConfig(), next)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1, ms: 1}, spanSpec{service: "a", name: "/x", end: 11, ms: 1}))
	if n := lookup(t).emitter.Pending(); n != 0 {
		t.Fatalf("%d points kept after a permanent error", n)
	}
	// 1 window x 7 outputs = 7 points
	wantCounter(t, h.tel, "otelcol_window_aggregator_dropped_points", map[string]string{"reason": "permanent_error"}, 7)
	wantCounter(t, h.tel, "otelcol_window_aggregator_emit_failures", map[string]string{"reason": "permanent"}, 1)
}

func TestConcurrentIngestFromSeveralPipelines(t *testing.T) {
	useFakeClock(t)
	cfg := latencyConfig()
	cfg.AllowedLateness = time.Hour
	h := newConnectorHarness(t, cfg, true)
	const goroutines, batches, perBatch = 4, 50, 20
	inParallel(goroutines, func(g int) {
		for b := range batches {
			var specs []spanSpec
			for i := range perBatch {
				specs = append(specs, spanSpec{service: "a", name: "/x", end: float64(1 + (g*batches*perBatch+b*perBatch+i)%500), ms: 1})
			}
			h.sendTraces(traces(specs...))
		}
	})
	h.shutdown()
	var total float64
	for _, p := range find(points(h.metrics.AllMetrics()), "lat.count", attrsAX) {
		total += p.value
	}
	if total != goroutines*batches*perBatch {
		t.Fatalf("counted %v spans over all windows and firings, want %d", total, goroutines*batches*perBatch)
	}
}

// flakyMetrics fails with err until told otherwise.
type flakyMetrics struct {
	mu   sync.Mutex
	err  error
	sink consumertest.MetricsSink
}

func (f *flakyMetrics) setErr(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *flakyMetrics) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.sink.ConsumeMetrics(ctx, md)
}

func (f *flakyMetrics) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func TestShutdownWhileIngesting(t *testing.T) {
	useFakeClock(t)
	h := newConnectorHarness(t, latencyConfig(), true)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range 200 {
				for _, consume := range h.traces {
					// Errors are fine once the pipeline is down; races and panics are not.
					_ = consume(context.Background(), traces(spanSpec{service: "a", name: "/x", end: float64(1 + (g*200+i)%300), ms: 1}))
				}
			}
		}()
	}
	close(start)
	h.shutdown()
	wg.Wait()
}
