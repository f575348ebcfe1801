package windowaggregator

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
)

// hangingMetrics blocks its first request until released, and counts the data points it took.
type hangingMetrics struct {
	entered chan struct{} // closed when the first request is in
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	points  int
}

func newHangingMetrics() *hangingMetrics {
	return &hangingMetrics{entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *hangingMetrics) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	h.mu.Lock()
	h.points += md.DataPointCount()
	h.mu.Unlock()
	return nil
}

func (h *hangingMetrics) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// A consumer that hangs holds up neither ingest nor collection: while it hangs, every ingest call
// returns, what fires is kept within emit.max_pending_points (the oldest dropped and counted), and
// once it recovers every data point is delivered or counted as dropped.
func TestHangingConsumerDoesNotBlockIngest(t *testing.T) {
	useFakeClock(t)
	const windows = 30
	batch := func(i int) []spanSpec { // each closes the window before it
		return []spanSpec{{service: "a", name: "/x", end: float64(10*i + 1), ms: 1}, {service: "a", name: "/x", end: float64(10*i + 10), ms: 1}}
	}
	cfg := latencyConfig()
	cfg.Emit.MaxPendingPoints, cfg.Emit.MaxPointsPerSend = 35, 7 // five windows' 7 points
	type started struct {
		c   interface{ Shutdown(context.Context) error }
		tel *componenttest.Telemetry
	}
	run := func(next consumer.Metrics, during func(i int)) started {
		tel := componenttest.NewTelemetry()
		set := connectortest.NewNopSettings(Type)
		set.TelemetrySettings = tel.NewTelemetrySettings()
		c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, next)
		must(t, err)
		must(t, c.Start(context.Background(), componenttest.NewNopHost()))
		for i := range windows {
			must(t, c.ConsumeTraces(context.Background(), traces(batch(i)...)))
			during(i)
		}
		return started{c, tel}
	}
	// The same batches to a consumer that never hangs: the points to account for.
	ref := newHangingMetrics()
	close(ref.release)
	refRun := run(ref, func(int) { lookup(t).settle() })
	must(t, refRun.c.Shutdown(context.Background()))
	// Batch i closes [10i, 10i+10); the last span's window, [300, 310), fires at shutdown: 31 windows
	// of one series, 7 outputs each.
	const total = (windows + 1) * 7
	if ref.points != total {
		t.Fatalf("without a hang, %d points delivered, want %d", ref.points, total)
	}

	hang := newHangingMetrics()
	var em *delivery.Emitter
	ingested := make(chan started)
	go func() {
		ingested <- run(hang, func(i int) {
			em = lookup(t).emitter
			if i == 0 {
				<-hang.entered // the first window's request is in, and hangs
			}
		})
	}()
	var hung started
	select {
	case hung = <-ingested: // every ingest call returned while the consumer hung
	case <-time.After(30 * time.Second):
		t.Fatal("ingest blocked behind the hanging consumer")
	}
	em.Collect(context.Background()) // what the component's goroutine does on its own
	queued := em.Pending()
	if queued > cfg.Emit.MaxPendingPoints {
		t.Fatalf("%d points queued while the consumer hangs, over emit.max_pending_points %d", queued, cfg.Emit.MaxPendingPoints)
	}
	close(hang.release)
	must(t, hung.c.Shutdown(context.Background()))
	dropped := counterValue(t, hung.tel, "otelcol_window_aggregator_dropped_points", map[string]string{"reason": "queue_full"})
	if dropped == 0 || int64(hang.points)+dropped != int64(total) {
		t.Fatalf("delivered %d + dropped %d points, want the %d of the run without a hang, some dropped", hang.points, dropped, total)
	}
}
