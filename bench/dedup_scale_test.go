package bench

// Dedup at a gateway's rate, with the defaults: the identities of a minute and a half of spans at
// 50,000 a second, through the factory. It runs here rather than in the component's package, whose
// tests run with -race, where 4.6 million spans take minutes and the heap is the race detector's.

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator"
)

// lastCounts keeps the latest cumulative count of every series of one metric.
type lastCounts struct {
	name string
	mu   sync.Mutex
	last map[string]int64
}

func (c *lastCounts) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	forEachPoint(md, c.name, func(_ int64, attrs pcommon.Map, v int64) {
		svc, _ := attrs.Get("service.name")
		c.last[svc.AsString()] = v
	})
	return nil
}

func (c *lastCounts) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *lastCounts) total() (n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.last {
		n += v
	}
	return n
}

// gatewayBatch is batch i of the test's traffic: 1000 spans of 10 services, each with its own random
// trace and span ids, ending 20 µs apart from i × 20 ms on: 50,000 spans a second of event time.
// The same i gives the same spans, built anew: a resend as an exporter makes it, new bytes.
func gatewayBatch(start int64, i int) ptrace.Traces {
	rng := rand.New(rand.NewPCG(uint64(i), 41))
	td := ptrace.NewTraces()
	for s := range numServices {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", serviceNames[s])
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for k := range recordsPerBatch / numServices {
			sp := spans.AppendEmpty()
			setRandomIDs(rng, sp)
			sp.SetName("GET /")
			sp.SetKind(ptrace.SpanKindServer)
			end := start + int64(i)*int64(20*time.Millisecond) + int64(k*numServices+s)*int64(20*time.Microsecond)
			sp.SetStartTimestamp(pcommon.Timestamp(end - int64(time.Millisecond)))
			sp.SetEndTimestamp(pcommon.Timestamp(end))
		}
	}
	return td
}

// TestDedupAtAGatewaysRate: one-minute windows at 50,000 spans a second of event time with 30 s of
// allowed lateness, dedup at its defaults (max_ids 5,000,000): 4.4 million distinct spans (88 s of
// event time, all of them remembered at the end: the first window's expire at 90 s), and 5% of the
// batches resent as new bytes 10 s of event time after their originals, within the lateness. Every
// copy is recognised, the counts are exact, and the heap grows by at most 12 bytes an identity and
// a few megabytes (the windows' state, the self-telemetry, the garbage of the last batches).
func TestDedupAtAGatewaysRate(t *testing.T) {
	const (
		batches = 4400 // of 1000 spans
		resend  = 20   // every 20th batch is resent,
		later   = 500  // 500 batches (10 s) later
	)
	cfg := windowaggregator.NewConnectorFactory().CreateDefaultConfig().(*windowaggregator.Config)
	cfg.Window.Size = time.Minute
	cfg.AllowedLateness = 30 * time.Second
	cfg.Aggregations = []windowaggregator.AggregationConfig{{Name: "requests", Signal: "spans", GroupBy: groupBy("service.name")}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.Dedup.Enabled || cfg.Dedup.MaxIDs != 5_000_000 {
		t.Fatalf("dedup defaults: enabled %v, max_ids %d; want true and 5,000,000", cfg.Dedup.Enabled, cfg.Dedup.MaxIDs)
	}
	out := &lastCounts{name: "requests.count", last: map[string]int64{}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := newWindowAggregator(t, cfg, out)
	start := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixNano()
	ctx := context.Background()
	copies := 0
	for i := 0; i < batches+later; i++ {
		if i < batches {
			if err := h.traces.ConsumeTraces(ctx, gatewayBatch(start, i)); err != nil {
				t.Fatal(err)
			}
		}
		if j := i - later; j >= 0 && j%resend == 0 {
			if err := h.traces.ConsumeTraces(ctx, gatewayBatch(start, j)); err != nil {
				t.Fatal(err)
			}
			copies += recordsPerBatch
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	identities := int64(batches * recordsPerBatch)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	remembered := h.waInt(t, "otelcol_window_aggregator_dedup_identities")
	h.shutdown(t)

	if got := h.waCounter(t, "otelcol_window_aggregator_duplicate_records"); got != int64(copies) {
		t.Errorf("duplicate_records %d, want every one of the %d copies", got, copies)
	}
	if got := h.waCounter(t, "otelcol_window_aggregator_dedup_overflow"); got != 0 {
		t.Errorf("dedup_overflow %d, want 0", got)
	}
	if got := out.total(); got != identities {
		t.Errorf("the counts add up to %d, want the %d distinct spans", got, identities)
	}
	if remembered != identities {
		t.Errorf("%d identities remembered at the end, want all %d", remembered, identities)
	}
	const slack = 8 << 20
	if limit := 12*identities + slack; growth > limit {
		t.Errorf("the heap grew %d bytes (%.1f an identity), more than 12 an identity and 8 MiB", growth, float64(growth)/float64(identities))
	}
	t.Logf("%d spans and %d copies; heap growth %.1f MB, %.2f bytes an identity", identities, copies, float64(growth)/1e6, float64(growth)/float64(identities))
}
