package bench

// The connectors under test: the window_aggregator and span_metrics configurations, the harness that
// builds and drives either of them and reads its counters, and what the benchmarks measure and report
// besides time (allocations, CPU used by other processes).

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/windowaggregator/windowaggregator"
)

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
	delta      bool     // temporality: delta, late_firings: revise (the default is cumulative, fold)
	explicit   []any    // histogram.explicit.buckets; nil: the exponential histogram
	exemplars  bool     // exemplars: {enabled: true, max_per_data_point: 5}, as smConfigWithExemplars
	weightNone bool     // weight: none (the default for spans is adjusted_count)
	dedupOff   bool     // dedup.enabled: false (also for every configuration with BENCH_DEDUP=off)
	// OTTL doing what the plain configuration does, for its cost: one condition that every span of
	// the workload meets (server spans), http.request.method computed, the duration computed.
	ottlCondition, ottlKey, ottlValue bool
}

// explicitBuckets are span_metrics' default explicit bounds, as durations.
var explicitBuckets = []any{"2ms", "4ms", "6ms", "8ms", "10ms", "50ms", "100ms", "200ms", "400ms", "800ms", "1s", "1400ms", "2s", "5s", "10s", "15s"}

// groupBy is a group_by of plain keys.
func groupBy(keys ...string) []windowaggregator.GroupByKey {
	out := make([]windowaggregator.GroupByKey, len(keys))
	for i, k := range keys {
		out[i] = windowaggregator.GroupByKey{Key: k}
	}
	return out
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
	if o.dedupOff || os.Getenv("BENCH_DEDUP") == "off" {
		cfg.Dedup.Enabled = false
	}
	if o.delta {
		cfg.Temporality, cfg.LateFirings = "delta", "revise"
	}
	if o.maxSeries > 0 {
		cfg.MaxSeries = o.maxSeries
	}
	if o.logs {
		cfg.Aggregations = []windowaggregator.AggregationConfig{{
			Name:    "log.volume",
			Signal:  "logs",
			GroupBy: groupBy("service.name", "severity.text"),
			Value:   windowaggregator.ValueConfig{Source: "attribute:http.response.body.size"},
			Outputs: o.outputs,
		}}
	} else {
		cfg.Aggregations = []windowaggregator.AggregationConfig{{
			Name:    "http.server.latency",
			Signal:  "spans",
			GroupBy: groupBy(spanGroupBy...),
			Outputs: o.outputs,
		}}
		if o.explicit != nil {
			cfg.Aggregations[0].Histogram = &windowaggregator.HistogramConfig{
				Explicit: &windowaggregator.ExplicitHistogramConfig{Buckets: o.explicit}}
		}
		cfg.Aggregations[0].Exemplars = windowaggregator.ExemplarsConfig{Enabled: o.exemplars, MaxPerDataPoint: exemplarsPerPoint}
		if o.weightNone {
			cfg.Aggregations[0].Weight = "none"
		}
		a := &cfg.Aggregations[0]
		if o.ottlCondition {
			a.Where = &windowaggregator.WhereConfig{Conditions: []string{"span.kind == SPAN_KIND_SERVER"}}
		}
		if o.ottlKey {
			a.GroupBy[2] = windowaggregator.GroupByKey{Key: "http.request.method", OTTL: `span.attributes["http.request.method"]`}
		}
		if o.ottlValue {
			a.Value = windowaggregator.ValueConfig{OTTL: "Double(span.end_time_unix_nano - span.start_time_unix_nano) / 1000000.0"}
		}
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

// exemplarsPerPoint is max_per_data_point of both sides when exemplars are on: span_metrics' default.
const exemplarsPerPoint = 5

// smConfigWithExemplars is smConfig with exemplars on: span_metrics keeps the first
// exemplarsPerPoint spans of each histogram point between flushes.
func smConfigWithExemplars() *spanmetricsconnector.Config {
	cfg := smConfig()
	cfg.Exemplars = spanmetricsconnector.ExemplarsConfig{Enabled: true, MaxPerDataPoint: exemplarsPerPoint}
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
	start(tb, ctx, h.comp, err)
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
	start(tb, ctx, c, err)
	return &harness{traces: c, comp: c, reader: reader, clock: clock}
}

// start starts c, the connector just created (err: what creating it returned), failing tb if
// creating or starting it failed.
func start(tb testing.TB, ctx context.Context, c component.Component, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
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
func (h *harness) waCounter(tb testing.TB, name string) int64 { return h.waInt(tb, name) }

// waInt returns one of window_aggregator's int64 counters or gauges, summed over its attribute sets.
func (h *harness) waInt(tb testing.TB, name string) (n int64) {
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					n += dp.Value
				}
			case metricdata.Gauge[int64]:
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
	want := h.wantFired(lastSlot)
	// Windows fire in the component's own goroutine, which the ingest call only asks: wait for it.
	_, fired, _ := h.waCounters(tb)
	for deadline := time.Now().Add(10 * time.Second); fired < want-tolerance*h.series && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		_, fired, _ = h.waCounters(tb)
	}
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
