// Package bench compares the window_aggregator connector with contrib's span_metrics connector on
// the same pre-built batches. It is a module of its own so that the component's go.mod never depends
// on collector-contrib. See README.md for the command and how to compare runs with benchstat.
package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/windowaggregator/windowaggregator"
)

// ---------------------------------------------------------------------------------------------
// Workload
// ---------------------------------------------------------------------------------------------

const (
	recordsPerBatch = 1000
	numServices     = 10
	numSpanNames    = 20
	// heapSeries is the number of distinct series of BenchmarkHeapPerSeries (all in one window).
	heapSeries = 100_000
)

var (
	methods    = []string{"GET", "POST", "PUT", "DELETE"}
	severities = []string{"INFO", "INFO", "INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARN", "ERROR"}
	spanNames  = func() []string {
		s := make([]string, numSpanNames)
		for i := range s {
			s[i] = fmt.Sprintf("/api/v1/resource-%02d/{id}", i)
		}
		return s
	}()
	serviceNames = func() []string {
		s := make([]string, numServices)
		for i := range s {
			s[i] = fmt.Sprintf("service-%02d", i)
		}
		return s
	}()

	// spansPerSecond is the event-time rate of the workload: every batch covers
	// recordsPerBatch/spansPerSecond seconds of event time (its slot, slotNanos long), and a 1m
	// tumbling window fires every slotsPerMinute batches. At the default, 1000 spans/s, a window
	// holds 75 spans per series, and the results of every window weigh heavily per span;
	// BENCH_SPANS_PER_SECOND=50000 is a busy collector, where a window holds 3750 spans per series.
	spansPerSecond            = envInt("BENCH_SPANS_PER_SECOND", 1000)
	slotNanos, slotsPerMinute = slotsFor(spansPerSecond)

	// ringLen is the number of pre-built batches a benchmark cycles through: one minute of event
	// time at the default rate (at most 60 batches at any rate). BENCH_RING overrides it, to check
	// that the once-per-lap timestamp shift does not distort the result.
	ringLen = envInt("BENCH_RING", min(slotsPerMinute, 60))

	// baseTime is slot 0: a minute boundary eventTimeBehind before the process started. The event
	// time must stay behind the wall clock: window_aggregator's watermark never runs ahead of the
	// clock (W = min(greatest accepted event time, now) - max_out_of_orderness), so spans stamped
	// after time.Now() would stop windows from firing and the benchmark would measure something
	// else. checkAllAggregated and checkFired fail a benchmark in which a span was ahead of the clock.
	baseTime = time.Now().Add(-eventTimeBehind).Truncate(time.Minute).UnixNano()
)

// eventTimeBehind is how far behind the wall clock the event time starts. A benchmark covers b.N
// slots of event time (1 s each at the default 1000 spans/s; runPairedProcs twice as many): 365 days
// is 31.5 million batches at that rate, far more than any benchmark here feeds (window_aggregator
// takes 50 to 200 µs a batch, so -benchtime 10s is some 200000 batches, 2.3 days of event time).
const eventTimeBehind = 365 * 24 * time.Hour

// maxFutureSkew is the largest skew the engine accepts (its limit is MaxInt64/256 ns, about 417
// days; 1000000h is refused when the connector is created).
const maxFutureSkew = 365 * 24 * time.Hour

// slotsFor returns the event time one batch covers at rate spans per second, and how many batches
// make a minute. The rate must give whole nanoseconds between spans and a whole number of batches
// per minute: 1000, 2000, 5000, 10000, 20000, 50000 and 100000 do; 150 or 3000 do not.
func slotsFor(rate int) (slotNanos int64, slotsPerMinute int) {
	slotNanos = int64(time.Second) * recordsPerBatch / int64(rate)
	if slotNanos*int64(rate) != int64(time.Second)*recordsPerBatch || slotNanos%recordsPerBatch != 0 ||
		int64(time.Minute)%slotNanos != 0 {
		panic(fmt.Sprintf("BENCH_SPANS_PER_SECOND=%d: %d spans per batch do not divide a minute evenly", rate, recordsPerBatch))
	}
	return slotNanos, int(int64(time.Minute) / slotNanos)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// latencyNanos returns a latency-like duration: lognormal, median 50 ms, sigma 1, clamped to
// [100 µs, 60 s].
func latencyNanos(rng *rand.Rand) int64 {
	ms := 50 * math.Exp(rng.NormFloat64())
	return int64(min(max(ms, 0.1), 60_000) * 1e6)
}

// ring is a set of pre-built batches, each stamped with an event-time slot; shifting a batch to a
// new slot rewrites its timestamps in place (the batches are never handed to anything that keeps
// them).
type ring struct {
	slot  []int64
	shift func(i int, d pcommon.Timestamp)
	touch func(i int) int // reads batch i's records, keys and values
	n     int
}

// setSlot moves batch i to event-time slot s.
func (r *ring) setSlot(i int, s int64) {
	if d := s - r.slot[i]; d != 0 {
		r.shift(i, pcommon.Timestamp(d*slotNanos))
		r.slot[i] = s
	}
}

// reset stamps batch i with slot i.
func (r *ring) reset() {
	for i := range r.slot {
		r.setSlot(i, int64(i))
	}
}

// traceRing is a ring of span batches: 1000 spans each, 10 services (one ResourceSpans each) x 20
// span names, http.request.method among 4 values, kind SERVER, latency-like durations, end
// timestamps spread over the batch's second. Each service has instances instances
// (service.instance.id), which take turns batch by batch: batch i comes from instance i%instances of
// every service.
type traceRing struct {
	ring
	batches []ptrace.Traces
}

func newTraceRing(n int, seed uint64, instances int) *traceRing {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	tr := &traceRing{batches: make([]ptrace.Traces, n)}
	tr.n = n
	tr.slot = make([]int64, n)
	for i := range tr.batches {
		tr.batches[i] = buildSpanBatch(rng, baseTime+int64(i)*slotNanos, instances, i%instances)
		tr.slot[i] = int64(i)
	}
	tr.shift = func(i int, d pcommon.Timestamp) { shiftTraces(tr.batches[i], d) }
	tr.touch = func(i int) int { return touchTraces(tr.batches[i]) }
	return tr
}

// buildSpanBatch builds a batch of slot slotStart from instance inst (of instances) of every
// service; with one instance, service s's service.instance.id is service-ss-s.
func buildSpanBatch(rng *rand.Rand, slotStart int64, instances, inst int) ptrace.Traces {
	td := ptrace.NewTraces()
	perService := recordsPerBatch / numServices
	for s := 0; s < numServices; s++ {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", serviceNames[s])
		ra.PutStr("service.instance.id", fmt.Sprintf("%s-%d", serviceNames[s], s*instances+inst))
		ra.PutStr("telemetry.sdk.language", "go")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
		spans := ss.Spans()
		spans.EnsureCapacity(perService)
		for k := 0; k < perService; k++ {
			sp := spans.AppendEmpty()
			var tid [16]byte
			var sid [8]byte
			for j := range tid {
				tid[j] = byte(rng.Uint32())
			}
			for j := range sid {
				sid[j] = byte(rng.Uint32())
			}
			sp.SetTraceID(tid)
			sp.SetSpanID(sid)
			sp.SetName(spanNames[rng.IntN(numSpanNames)])
			sp.SetKind(ptrace.SpanKindServer)
			// end times interleave the services over the second
			end := slotStart + int64(k*numServices+s)*(slotNanos/recordsPerBatch)
			sp.SetStartTimestamp(pcommon.Timestamp(end - latencyNanos(rng)))
			sp.SetEndTimestamp(pcommon.Timestamp(end))
			a := sp.Attributes()
			a.EnsureCapacity(3)
			a.PutInt("http.response.status_code", 200)
			a.PutStr("http.request.method", methods[rng.IntN(len(methods))])
			a.PutStr("url.scheme", "https")
		}
	}
	return td
}

// touchTraces reads every span's name and attributes, as decoding the batch would have written them.
func touchTraces(td ptrace.Traces) (n int) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				n += len(sp.Name()) + int(sp.EndTimestamp()&1)
				for key, v := range sp.Attributes().All() {
					n += int(key[0]) + len(v.Str())
				}
			}
		}
	}
	return n
}

// coldBytes is BENCH_COLD_BYTES: when set, the serial loop and BenchmarkPaired write a buffer of that
// many bytes (make it larger than the last-level cache) and then read the batch before every batch,
// untimed, so that each batch meets the component's state cold and its own data warm, as in a
// collector, where the receiver has just decoded the batch and much else has run since the last one.
var coldBytes = envInt("BENCH_COLD_BYTES", 0)

var (
	evictBuf []byte
	chilled  int // what chill read, kept so that the reads cannot be optimized away
)

// chill evicts the caches and warms batch i of r. The buffer is outside the Go heap where the system
// allows (see evictBuffer), so that it does not raise the garbage collector's heap goal.
func chill(r *ring, i int) {
	if len(evictBuf) != coldBytes {
		evictBuf = evictBuffer(coldBytes)
	}
	for k := 0; k < len(evictBuf); k += 64 {
		evictBuf[k]++
	}
	chilled += r.touch(i)
}

func shiftTraces(td ptrace.Traces, d pcommon.Timestamp) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				sp.SetStartTimestamp(sp.StartTimestamp() + d)
				sp.SetEndTimestamp(sp.EndTimestamp() + d)
			}
		}
	}
}

// logRing is a ring of log batches: 1000 records each, 10 services, severity mostly INFO, a
// numeric http.response.body.size attribute.
type logRing struct {
	ring
	batches []plog.Logs
}

func newLogRing(n int, seed uint64) *logRing {
	rng := rand.New(rand.NewPCG(seed, 0x10c5))
	lr := &logRing{batches: make([]plog.Logs, n)}
	lr.n = n
	lr.slot = make([]int64, n)
	for i := range lr.batches {
		lr.batches[i] = buildLogBatch(rng, baseTime+int64(i)*slotNanos)
		lr.slot[i] = int64(i)
	}
	lr.shift = func(i int, d pcommon.Timestamp) { shiftLogs(lr.batches[i], d) }
	return lr
}

func buildLogBatch(rng *rand.Rand, slotStart int64) plog.Logs {
	ld := plog.NewLogs()
	perService := recordsPerBatch / numServices
	for s := 0; s < numServices; s++ {
		rl := ld.ResourceLogs().AppendEmpty()
		ra := rl.Resource().Attributes()
		ra.PutStr("service.name", serviceNames[s])
		ra.PutStr("telemetry.sdk.language", "go")
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("go.opentelemetry.io/contrib/bridges/otelslog")
		recs := sl.LogRecords()
		recs.EnsureCapacity(perService)
		for k := 0; k < perService; k++ {
			r := recs.AppendEmpty()
			ts := slotStart + int64(k*numServices+s)*(slotNanos/recordsPerBatch)
			r.SetTimestamp(pcommon.Timestamp(ts))
			r.SetObservedTimestamp(pcommon.Timestamp(ts + int64(time.Millisecond)))
			sev := severities[rng.IntN(len(severities))]
			r.SetSeverityText(sev)
			r.Body().SetStr("request served")
			a := r.Attributes()
			a.EnsureCapacity(2)
			a.PutStr("http.request.method", methods[rng.IntN(len(methods))])
			a.PutInt("http.response.body.size", int64(200*math.Exp(1.5*rng.NormFloat64())))
		}
	}
	return ld
}

func shiftLogs(ld plog.Logs, d pcommon.Timestamp) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			recs := sls.At(j).LogRecords()
			for k := 0; k < recs.Len(); k++ {
				r := recs.At(k)
				r.SetTimestamp(r.Timestamp() + d)
				r.SetObservedTimestamp(r.ObservedTimestamp() + d)
			}
		}
	}
}

// Rings are built once per process and re-stamped (reset) at the start of every benchmark run.
var (
	ringsMu    sync.Mutex
	traceRings = map[[2]int]*traceRing{}
	logRings   = map[int]*logRing{}
)

// traceRingFor returns the k-th trace ring (k: the goroutine of a parallel benchmark), one instance
// per service.
func traceRingFor(k int) *traceRing { return traceRingOf(k, 1) }

// traceRingOf returns the k-th trace ring whose services have instances instances each.
func traceRingOf(k, instances int) *traceRing {
	ringsMu.Lock()
	defer ringsMu.Unlock()
	r, ok := traceRings[[2]int{k, instances}]
	if !ok {
		r = newTraceRing(ringLen, uint64(k)+1, instances)
		traceRings[[2]int{k, instances}] = r
	}
	r.reset()
	return r
}

func logRingFor(k int) *logRing {
	ringsMu.Lock()
	defer ringsMu.Unlock()
	r, ok := logRings[k]
	if !ok {
		r = newLogRing(ringLen, uint64(k)+1)
		logRings[k] = r
	}
	r.reset()
	return r
}

// ---------------------------------------------------------------------------------------------
// Components
// ---------------------------------------------------------------------------------------------

var (
	outputsSumHist    = []string{"count", "sum", "histogram"}
	outputsPercentile = []string{"count", "avg", "p50", "p95", "p99", "max"}
	spanGroupBy       = []string{"service.name", "span.name", "http.request.method"}
)

type waOptions struct {
	outputs    []string
	slide      time.Duration // 0: tumbling
	outOfOrder time.Duration
	maxSeries  int
	logs       bool
	perSource  []string // watermark.per_source
}

// waConfig is the window_aggregator configuration of the benchmarks: 1m windows, no ticker (the
// results are emitted synchronously inside ConsumeTraces when the watermark passes a window end).
func waConfig(o waOptions) *windowaggregator.Config {
	cfg := windowaggregator.NewConnectorFactory().CreateDefaultConfig().(*windowaggregator.Config)
	cfg.Window.Size = time.Minute
	cfg.Window.Slide = o.slide
	cfg.Watermark.MaxFutureSkew = maxFutureSkew
	cfg.Watermark.MaxOutOfOrderness = o.outOfOrder
	cfg.Watermark.PerSource = o.perSource
	cfg.Emit.Interval = time.Hour
	if o.maxSeries > 0 {
		cfg.MaxSeries = o.maxSeries
	}
	if o.logs {
		cfg.Aggregations = []windowaggregator.AggregationConfig{{
			Name:    "log.volume",
			Signal:  "logs",
			GroupBy: []string{"service.name", "severity.text"},
			Value:   "attribute:http.response.body.size",
			Outputs: o.outputs,
		}}
	} else {
		cfg.Aggregations = []windowaggregator.AggregationConfig{{
			Name:    "http.server.latency",
			Signal:  "spans",
			GroupBy: spanGroupBy,
			Outputs: o.outputs,
		}}
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return cfg
}

// smConfig is the span_metrics configuration: default dimensions (service.name, span.name,
// span.kind, status.code) plus http.request.method, an exponential histogram of max_size 160 (its
// default), delta temporality (each flush reports the spans since the previous one, like a
// tumbling window), flushed every minute of event time by the fake clock (see harness.tick), no exemplars.
//
// span_metrics has no percentile output: its exponential histogram is the closest thing (the
// percentiles are computed downstream from it), so it is what the percentile variant compares with.
func smConfig() *spanmetricsconnector.Config {
	cfg := spanmetricsconnector.NewFactory().CreateDefaultConfig().(*spanmetricsconnector.Config)
	cfg.Dimensions = []spanmetricsconnector.Dimension{{Name: "http.request.method"}}
	cfg.Histogram.Exponential = configoptional.Some(spanmetricsconnector.ExponentialHistogramConfig{MaxSize: 160})
	cfg.AggregationTemporality = "AGGREGATION_TEMPORALITY_DELTA"
	cfg.MetricsFlushInterval = time.Minute
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return cfg
}

// harness is one started connector instance.
type harness struct {
	traces consumer.Traces
	logs   consumer.Logs
	comp   component.Component
	reader *sdkmetric.ManualReader
	// clock drives span_metrics' flush ticker: tick advances it by one flush interval, and the
	// connector's goroutine then builds and sends the metrics under the lock ConsumeTraces takes.
	clock *clockwork.FakeClock
	// window_aggregator's window slide (its size when tumbling), max_out_of_orderness and number of
	// series (every one has records in every window), for checkFired; lagSlots is how many slots the
	// watermark trails the greatest event time by (with watermark.per_source and services whose
	// instances take turns, instances-1).
	slide, outOfOrder, series, lagSlots int64
	instances                           int64 // with watermark.per_source: instances per service
}

// Series of the workload: spans by service, span name and method; logs by service and severity.
var (
	spanSeries = int64(numServices * numSpanNames * len(methods))
	logSeries  = int64(numServices * len(slices.Compact(slices.Sorted(slices.Values(severities)))))
)

var instanceSeq atomic.Int64

func settings(f connector.Factory) (connector.Settings, *sdkmetric.ManualReader) {
	set := connectortest.NewNopSettings(f.Type())
	set.ID = component.MustNewIDWithName(f.Type().String(), fmt.Sprintf("bench%d", instanceSeq.Add(1)))
	reader := sdkmetric.NewManualReader()
	set.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	return set, reader
}

func newWindowAggregator(tb testing.TB, cfg *windowaggregator.Config, next consumer.Metrics) *harness {
	tb.Helper()
	if next == nil {
		next = consumertest.NewNop()
	}
	f := windowaggregator.NewConnectorFactory()
	set, reader := settings(f)
	ctx := context.Background()
	h := &harness{reader: reader, slide: int64(cfg.Window.Slide), outOfOrder: int64(cfg.Watermark.MaxOutOfOrderness), series: spanSeries}
	if h.slide == 0 {
		h.slide = int64(cfg.Window.Size)
	}
	var err error
	if cfg.Aggregations[0].Signal == "logs" {
		h.series = logSeries
		var c connector.Logs
		c, err = f.CreateLogsToMetrics(ctx, set, cfg, next)
		h.logs, h.comp = c, c
	} else {
		var c connector.Traces
		c, err = f.CreateTracesToMetrics(ctx, set, cfg, next)
		h.traces, h.comp = c, c
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.comp.Start(ctx, componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	return h
}

func newSpanMetrics(tb testing.TB, cfg *spanmetricsconnector.Config, next consumer.Metrics) *harness {
	tb.Helper()
	if next == nil {
		next = consumertest.NewNop()
	}
	f := spanmetricsconnector.NewFactory()
	set, reader := settings(f)
	clock := clockwork.NewFakeClockAt(time.Unix(0, baseTime))
	ctx := clockwork.AddToContext(context.Background(), clock)
	c, err := f.CreateTracesToMetrics(ctx, set, cfg, next)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	return &harness{traces: c, comp: c, reader: reader, clock: clock}
}

// tick is called before the first batch of every minute of event time but the first:
// span_metrics flushes. Its goroutine builds the metrics under the lock that the ConsumeTraces call
// that follows waits for, so the flush is timed with span_metrics' batches.
func (h *harness) tick() {
	if h.clock != nil {
		h.clock.Advance(time.Minute)
	}
}

func (h *harness) shutdown(tb testing.TB) {
	if err := h.comp.Shutdown(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// waCounters reads the window_aggregator's self-telemetry: records by outcome and windows fired.
func (h *harness) waCounters(tb testing.TB) (outcomes map[string]int64, fired, active int64) {
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	outcomes = map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					switch m.Name {
					case "otelcol_window_aggregator_records":
						o, _ := dp.Attributes.Value(attribute.Key("outcome"))
						outcomes[o.AsString()] += dp.Value
					case "otelcol_window_aggregator_windows_fired":
						fired += dp.Value
					}
				}
			case metricdata.Gauge[int64]:
				if m.Name == "otelcol_window_aggregator_active_series" {
					for _, dp := range d.DataPoints {
						active += dp.Value
					}
				}
			}
		}
	}
	return outcomes, fired, active
}

// waCounter returns the sum of window_aggregator's self-telemetry counter name (0 if it has none).
func (h *harness) waCounter(tb testing.TB, name string) (n int64) {
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range d.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// wantFired returns the windows_fired that window_aggregator must have counted once it took the
// batches of slots 0 to lastSlot: one firing per series for every window that ends by the
// watermark, which is the last slot's last span end (never a window end) less max_out_of_orderness,
// lagSlots slots earlier with per-source watermarks.
func (h *harness) wantFired(lastSlot int64) int64 {
	w := (lastSlot-h.lagSlots+1)*slotNanos - slotNanos/recordsPerBatch - h.outOfOrder // since baseTime
	if w <= 0 {
		return 0
	}
	return w / h.slide * h.series
}

// checkFired fails the benchmark unless window_aggregator fired the windows that slots 0 to
// lastSlot close (up to tolerance windows fewer: with concurrent batches the last batch's emission
// may give way to another one) and took no record stamped ahead of the wall clock.
func (h *harness) checkFired(tb testing.TB, lastSlot int64, tolerance int64) {
	if h.reader == nil || h.clock != nil {
		return
	}
	if n := h.waCounter(tb, "otelcol_window_aggregator_clock_skew_records"); n != 0 {
		tb.Errorf("window_aggregator: %d records stamped ahead of the wall clock: the benchmark's event time must stay behind time.Now()", n)
	}
	_, fired, _ := h.waCounters(tb)
	want := h.wantFired(lastSlot)
	if fired > want || fired < want-tolerance*h.series || (want > 0 && fired == 0) {
		tb.Errorf("window_aggregator: %d windows fired over slots 0 to %d, want %d", fired, lastSlot, want)
	}
}

// lateRecords returns the records window_aggregator did not aggregate on time (late, future,
// invalid, unmatched) out of records fed, failing the benchmark if the counts do not add up.
func (h *harness) lateRecords(b *testing.B, records int64) int64 {
	outcomes, _, _ := h.waCounters(b)
	if total := outcomes["aggregated"] + outcomes["late_updated"] + outcomes["late"] + outcomes["unmatched"]; total != records {
		b.Errorf("window_aggregator: %d records fed, outcomes %v", records, outcomes)
	}
	return records - outcomes["aggregated"]
}

// checkAllAggregated fails the benchmark when a record was not aggregated on time (which would
// make it cheaper and the result meaningless), when a record was stamped ahead of the wall clock,
// or when the windows that the batches close (slots 0 to records/1000-1) did not all fire.
func (h *harness) checkAllAggregated(b *testing.B, records int64) {
	if h.reader == nil || h.clock != nil {
		return
	}
	outcomes, _, _ := h.waCounters(b)
	if outcomes["aggregated"] != records || len(outcomes) != 1 {
		b.Errorf("window_aggregator: %d records fed, outcomes %v", records, outcomes)
	}
	h.checkFired(b, records/recordsPerBatch-1, 0)
	if h.instances > 0 { // every batch brings one instance of every service
		if n, want := h.waSources(b), numServices*min(records/recordsPerBatch, h.instances); n != want {
			b.Errorf("window_aggregator: %d sources held, want %d", n, want)
		}
	}
}

func readMallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// cpuMeter measures the CPU that other processes used while a benchmark ran, from /proc (Linux;
// elsewhere it reports nothing): the benchmarks need the machine's cores to themselves, and this
// says how far they had them.
type cpuMeter struct {
	wall      time.Time
	busy, own float64 // seconds of CPU: every process, this process
	ok        bool
}

func startCPUMeter() cpuMeter {
	busy, self, ok := cpuSeconds()
	return cpuMeter{wall: time.Now(), busy: busy, own: self, ok: ok}
}

// otherCores returns the average number of cores used by other processes (or stolen by the
// hypervisor) since m started.
func (m cpuMeter) otherCores() (float64, bool) {
	busy, self, ok := cpuSeconds()
	wall := time.Since(m.wall).Seconds()
	if !ok || !m.ok || wall <= 0 {
		return 0, false
	}
	return max(0, (busy-m.busy)-(self-m.own)) / wall, true
}

// clockTicks is USER_HZ, the unit of /proc/stat and /proc/self/stat times: 100 on Linux.
const clockTicks = 100

func cpuSeconds() (busy, self float64, ok bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	ps, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, false
	}
	_, rest, _ := strings.Cut(string(ps), ") ")
	g := strings.Fields(rest) // state ppid ... utime (12th) stime (13th)
	if len(g) < 13 {
		return 0, 0, false
	}
	ut, _ := strconv.ParseFloat(g[11], 64)
	st, _ := strconv.ParseFloat(g[12], 64)
	return busy / clockTicks, (ut + st) / clockTicks, true
}

func reportOtherCores(b *testing.B, m cpuMeter) {
	if c, ok := m.otherCores(); ok {
		b.ReportMetric(c, "other_cores")
	}
}

// report adds the per-record metrics; mallocs counts the timed loop's allocations.
func report(b *testing.B, unit string, mallocs uint64) {
	n := float64(b.N) * recordsPerBatch
	ns := float64(b.Elapsed().Nanoseconds()) / n
	b.ReportMetric(ns, "ns/"+unit)
	b.ReportMetric(1e9/ns, unit+"s/s")
	b.ReportMetric(float64(mallocs)/n, "allocs/"+unit)
}

// ---------------------------------------------------------------------------------------------
// Loops
// ---------------------------------------------------------------------------------------------

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

func outputsName(outputs []string) string { return strings.Join(outputs, "_") }

// ---------------------------------------------------------------------------------------------
// Benchmarks
// ---------------------------------------------------------------------------------------------

// BenchmarkTracesToMetrics: window_aggregator vs span_metrics on one goroutine, per output set.
// Compare the impl= columns with benchstat -col /impl; BenchmarkPaired measures the ratio on a
// busy machine.
func BenchmarkTracesToMetrics(b *testing.B) {
	for _, outputs := range [][]string{outputsSumHist, outputsPercentile} {
		b.Run("outputs="+outputsName(outputs), func(b *testing.B) {
			b.Run("impl=span_metrics", func(b *testing.B) {
				r := traceRingFor(0)
				h := newSpanMetrics(b, smConfig(), nil)
				mallocs := runSerial(b, h, &r.ring, func(ctx context.Context, i int) error {
					return h.traces.ConsumeTraces(ctx, r.batches[i])
				})
				report(b, "span", mallocs)
				h.shutdown(b)
			})
			b.Run("impl=window_aggregator", func(b *testing.B) {
				r := traceRingFor(0)
				h := newWindowAggregator(b, waConfig(waOptions{outputs: outputs}), nil)
				mallocs := runSerial(b, h, &r.ring, func(ctx context.Context, i int) error {
					return h.traces.ConsumeTraces(ctx, r.batches[i])
				})
				report(b, "span", mallocs)
				h.checkAllAggregated(b, int64(b.N)*recordsPerBatch)
				h.shutdown(b)
			})
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
					r := traceRingFor(0)
					h := newWindowAggregator(b, waConfig(waOptions{outputs: outputs, slide: w.slide}), nil)
					mallocs := runSerial(b, h, &r.ring, func(ctx context.Context, i int) error {
						return h.traces.ConsumeTraces(ctx, r.batches[i])
					})
					report(b, "span", mallocs)
					h.checkAllAggregated(b, int64(b.N)*recordsPerBatch)
					h.shutdown(b)
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
		r := logRingFor(0)
		h := newWindowAggregator(b, waConfig(waOptions{outputs: []string{"count", "sum", "p99"}, logs: true}), nil)
		mallocs := runSerial(b, h, &r.ring, func(ctx context.Context, i int) error {
			return h.logs.ConsumeLogs(ctx, r.batches[i])
		})
		report(b, "log", mallocs)
		h.checkAllAggregated(b, int64(b.N)*recordsPerBatch)
		h.shutdown(b)
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
