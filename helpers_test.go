package windowaggregator

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

const s = int64(time.Second)

// testClocks holds each test's fake clock (see useFakeClock), which testContext hands to the
// factories the way a caller passes a clock in: through the context.
var testClocks sync.Map // *testing.T -> *clock.Fake

// useFakeClock makes components the test creates (through testContext) read a fake clock at wall
// time 1000 s.
func useFakeClock(t *testing.T) *clock.Fake {
	clk := clock.NewFake(time.Unix(1000, 0))
	testClocks.Store(t, clk)
	t.Cleanup(func() { testClocks.Delete(t) })
	return clk
}

// testContext is the context to create the test's components with: it carries the test's fake
// clock, if it has one.
func testContext(t *testing.T) context.Context {
	if c, ok := testClocks.Load(t); ok {
		return clock.NewContext(context.Background(), c.(*clock.Fake))
	}
	return context.Background()
}

// baseConfig is a 10 s tumbling window with delta points and late firings that revise: each point is
// one firing of its window, so that the tests of windows, watermark and lateness read their counts
// window by window. The tests of the output modes (output_test.go) set their own.
func baseConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Window.Size = 10 * time.Second
	cfg.Emit.Interval = time.Hour
	cfg.Temporality, cfg.LateFirings = temporalityDelta, lateRevise
	return cfg
}

// connectorHarness is every connector instance of one id, wired to sinks, fed the way the collector
// feeds them: each batch to every instance of its signal.
type connectorHarness struct {
	t                  *testing.T
	metrics            *consumertest.MetricsSink
	lateTraces         *consumertest.TracesSink
	lateLogs           *consumertest.LogsSink
	t2m, t2t, l2m, l2l component.Component
	traces             []func(context.Context, ptrace.Traces) error
	logs               []func(context.Context, plog.Logs) error
	tel                *componenttest.Telemetry
}

func newConnectorHarness(t *testing.T, cfg *Config, withLate bool) *connectorHarness {
	t.Helper()
	return newHarnessWith(t, cfg, withLate, new(consumertest.MetricsSink))
}

// newConnectorHarnessTo wires the metrics output to next, without late outputs.
func newConnectorHarnessTo(t *testing.T, cfg *Config, next consumer.Metrics) *connectorHarness {
	t.Helper()
	return newHarnessWith(t, cfg, false, next)
}

func newHarnessWith(t *testing.T, cfg *Config, withLate bool, next consumer.Metrics) *connectorHarness {
	t.Helper()
	return newHarnessOn(t, cfg, withLate, next, componenttest.NewNopHost())
}

// newHarnessOn is newHarnessWith, its instances started on host (one with a storage extension, say).
func newHarnessOn(t *testing.T, cfg *Config, withLate bool, next consumer.Metrics, host component.Host) *connectorHarness {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := &connectorHarness{t: t, lateTraces: new(consumertest.TracesSink),
		lateLogs: new(consumertest.LogsSink), tel: componenttest.NewTelemetry()}
	if sink, ok := next.(*consumertest.MetricsSink); ok {
		h.metrics = sink
	}
	f := NewConnectorFactory()
	set := connectortest.NewNopSettings(Type)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	ctx := testContext(t)
	t2m, err := f.CreateTracesToMetrics(ctx, set, cfg, next)
	must(t, err)
	l2m, err := f.CreateLogsToMetrics(ctx, set, cfg, next)
	must(t, err)
	h.t2m, h.l2m = t2m, l2m
	h.traces = append(h.traces, t2m.ConsumeTraces)
	h.logs = append(h.logs, l2m.ConsumeLogs)
	all := []component.Component{t2m, l2m}
	if withLate {
		t2t, err := f.CreateTracesToTraces(ctx, set, cfg, h.lateTraces)
		must(t, err)
		l2l, err := f.CreateLogsToLogs(ctx, set, cfg, h.lateLogs)
		must(t, err)
		h.t2t, h.l2l = t2t, l2l
		// The metrics instance is handed each batch first in half the cases the collector builds; here
		// it is always first, and the tests with late data also run the other order.
		h.traces = append(h.traces, t2t.ConsumeTraces)
		h.logs = append(h.logs, l2l.ConsumeLogs)
		all = append(all, t2t, l2l)
	}
	for _, c := range all {
		must(t, c.Start(ctx, host))
	}
	t.Cleanup(func() { h.shutdown() })
	return h
}

func (h *connectorHarness) shutdown() {
	for _, c := range []component.Component{h.t2t, h.l2l, h.t2m, h.l2m} {
		if c != nil {
			must(h.t, c.Shutdown(context.Background()))
		}
	}
	h.t2t, h.l2l, h.t2m, h.l2m = nil, nil, nil, nil
}

// abandon leaves the instances without shutting them down: after a panic, whose locks they may hold.
func (h *connectorHarness) abandon() { h.t2t, h.l2l, h.t2m, h.l2m = nil, nil, nil, nil }

func (h *connectorHarness) sendTraces(td ptrace.Traces) {
	h.t.Helper()
	for _, c := range h.traces {
		must(h.t, c(context.Background(), td))
	}
	settleAll(h.t)
}

func (h *connectorHarness) sendLogs(ld plog.Logs) {
	h.t.Helper()
	for _, c := range h.logs {
		must(h.t, c(context.Background(), ld))
	}
	settleAll(h.t)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var _ connector.Traces = (*tracesToMetrics)(nil)

// spanSpec is one span: resource service, name, end time in seconds, duration in ms.
type spanSpec struct {
	service string
	name    string
	end     float64 // seconds; 0: no timestamp
	ms      float64
	attrs   map[string]any
	kind    ptrace.SpanKind
	id      uint64 // its trace and span ids (see spanIDs); 0: none
	// traceState is its W3C tracestate, as in "ot=th:c" (a span sampled at 25%, adjusted count 4)
	traceState string
	status     ptrace.StatusCode
	// scope is the name of the instrumentation scope of its service's spans (the first span of a
	// service names it)
	scope string
}

// spanIDs are the trace and span ids of a spanSpec's id.
func spanIDs(id uint64) (pcommon.TraceID, pcommon.SpanID) {
	var tr pcommon.TraceID
	var sp pcommon.SpanID
	binary.BigEndian.PutUint64(tr[8:], id)
	binary.BigEndian.PutUint64(sp[:], id)
	tr[0] = 0x7a
	return tr, sp
}

func traces(specs ...spanSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	byService := map[string]ptrace.SpanSlice{}
	for _, sp := range specs {
		spans, ok := byService[sp.service]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", sp.service)
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(sp.scope)
			spans = ss.Spans()
			byService[sp.service] = spans
		}
		span := spans.AppendEmpty()
		span.SetName(sp.name)
		span.SetKind(sp.kind)
		span.Status().SetCode(sp.status)
		if sp.id != 0 {
			tr, id := spanIDs(sp.id)
			span.SetTraceID(tr)
			span.SetSpanID(id)
		}
		span.TraceState().FromRaw(sp.traceState)
		if sp.end != 0 {
			end := int64(sp.end * float64(s))
			span.SetEndTimestamp(pcommon.Timestamp(end))
			span.SetStartTimestamp(pcommon.Timestamp(end - int64(sp.ms*1e6)))
		}
		if err := span.Attributes().FromRaw(sp.attrs); err != nil {
			panic(err)
		}
	}
	return td
}

// logSpec is one log record: resource service, time in seconds, attributes.
type logSpec struct {
	service  string
	ts       float64
	observed float64
	severity string
	attrs    map[string]any
}

func logs(specs ...logSpec) plog.Logs {
	ld := plog.NewLogs()
	for _, l := range specs {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", l.service)
		lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(int64(l.ts * float64(s))))
		lr.SetObservedTimestamp(pcommon.Timestamp(int64(l.observed * float64(s))))
		lr.SetSeverityText(l.severity)
		if err := lr.Attributes().FromRaw(l.attrs); err != nil {
			panic(err)
		}
	}
	return ld
}

// point is a flattened data point of any type, for comparisons.
type point struct {
	metric      string
	typ         pmetric.MetricType
	start, end  int64  // seconds
	attrs       string // sorted k=v
	resource    string
	value       float64 // int or double value, histogram count
	sum         float64 // histogram sum
	temporality pmetric.AggregationTemporality
	monotonic   bool
	buckets     []uint64 // an explicit histogram's bucket counts
}

func attrString(m pcommon.Map) string {
	var kv []string
	m.Range(func(k string, v pcommon.Value) bool {
		kv = append(kv, fmt.Sprintf("%s=%s(%s)", k, v.AsString(), v.Type()))
		return true
	})
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// points flattens every data point the sink received.
func points(all []pmetric.Metrics) []point {
	var out []point
	for _, md := range all {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			res := attrString(rm.Resource().Attributes())
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					base := point{metric: m.Name(), typ: m.Type(), resource: res}
					switch m.Type() {
					case pmetric.MetricTypeSum:
						base.temporality, base.monotonic = m.Sum().AggregationTemporality(), m.Sum().IsMonotonic()
						out = appendNumber(out, base, m.Sum().DataPoints())
					case pmetric.MetricTypeGauge:
						out = appendNumber(out, base, m.Gauge().DataPoints())
					case pmetric.MetricTypeHistogram:
						base.temporality = m.Histogram().AggregationTemporality()
						dps := m.Histogram().DataPoints()
						for d := 0; d < dps.Len(); d++ {
							dp := dps.At(d)
							p := histogramPoint(base, dp.StartTimestamp(), dp.Timestamp(), dp.Attributes(), dp.Count(), dp.Sum())
							p.buckets = dp.BucketCounts().AsRaw()
							out = append(out, p)
						}
					case pmetric.MetricTypeExponentialHistogram:
						base.temporality = m.ExponentialHistogram().AggregationTemporality()
						dps := m.ExponentialHistogram().DataPoints()
						for d := 0; d < dps.Len(); d++ {
							dp := dps.At(d)
							out = append(out, histogramPoint(base, dp.StartTimestamp(), dp.Timestamp(), dp.Attributes(), dp.Count(), dp.Sum()))
						}
					}
				}
			}
		}
	}
	return out
}

// eachMetric calls fn with every metric of all, and its resource.
func eachMetric(all []pmetric.Metrics, fn func(res pcommon.Resource, m pmetric.Metric)) {
	for _, md := range all {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					fn(rm.Resource(), ms.At(k))
				}
			}
		}
	}
}

// histogramPoint is base with a histogram data point's times, attributes, count and sum.
func histogramPoint(base point, start, end pcommon.Timestamp, attrs pcommon.Map, count uint64, sum float64) point {
	base.start, base.end = int64(start)/s, int64(end)/s
	base.attrs = attrString(attrs)
	base.value, base.sum = float64(count), sum
	return base
}

func appendNumber(out []point, base point, dps pmetric.NumberDataPointSlice) []point {
	for d := 0; d < dps.Len(); d++ {
		dp := dps.At(d)
		p := base
		p.start, p.end = int64(dp.StartTimestamp())/s, int64(dp.Timestamp())/s
		p.attrs = attrString(dp.Attributes())
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			p.value = float64(dp.IntValue())
		} else {
			p.value = dp.DoubleValue()
		}
		out = append(out, p)
	}
	return out
}

// find returns the points of one metric with exactly these attributes, in arrival order.
func find(ps []point, metric, attrs string) []point {
	var out []point
	for _, p := range ps {
		if p.metric == metric && p.attrs == attrs {
			out = append(out, p)
		}
	}
	return out
}

// wantCounter asserts the value of an int64 counter's data point with exactly these attributes.
func wantCounter(t *testing.T, tel *componenttest.Telemetry, name string, attrs map[string]string, want int64) {
	t.Helper()
	if got := counterValue(t, tel, name, attrs); got != want {
		t.Fatalf("%s%v = %d, want %d", name, attrs, got, want)
	}
}

func counterValue(t *testing.T, tel *componenttest.Telemetry, name string, attrs map[string]string) int64 {
	t.Helper()
	return counterSum(t, tel, name, attrs, true)
}

// counterIncluding sums the data points of an int64 counter whose attributes include attrs.
func counterIncluding(t *testing.T, tel *componenttest.Telemetry, name string, attrs map[string]string) int64 {
	t.Helper()
	return counterSum(t, tel, name, attrs, false)
}

// counterSum sums the data points of an int64 counter with attrs among their attributes, and with
// exact, no others.
func counterSum(t *testing.T, tel *componenttest.Telemetry, name string, attrs map[string]string, exact bool) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, m.Data)
	}
	var total int64
	for _, dp := range sum.DataPoints {
		match := !exact || dp.Attributes.Len() == len(attrs)
		for k, v := range attrs {
			if got, ok := dp.Attributes.Value(attribute.Key(k)); !ok || got.AsString() != v {
				match = false
			}
		}
		if match {
			total += dp.Value
		}
	}
	return total
}

// settle does what the component's goroutines do after an ingest call, and waits for it: collects
// what fired (after the goroutine's own collection and its checkpoint, if one is under way) and
// delivers the queue. Tests read the sinks after it.
func (s *shared) settle() {
	s.collect(context.Background())
	if s.storage != nil { // a checkpoint the component's goroutine is writing holds what it fired
		s.storage.Wait()
	}
	s.emitter.Send(context.Background(), false)
}

// settleAll settles every component state the test made.
func settleAll(t *testing.T) {
	t.Helper()
	registryMu.Lock()
	states := make([]*shared, 0, len(registry))
	for _, s := range registry {
		states = append(states, s)
	}
	registryMu.Unlock()
	for _, s := range states {
		s.settle()
	}
}

// inParallel runs fn(g) for every g in [0, n), each on a goroutine of its own, and waits for them.
func inParallel(n int, fn func(g int)) {
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(g)
		}()
	}
	wg.Wait()
}

// emit collects what the engine has fired and delivers it at once, as the component's goroutines do
// in turn; force tries a request in backoff too.
func (s *shared) emit(ctx context.Context, force bool) {
	s.collect(ctx)
	s.emitter.Send(ctx, force)
}

// keys is a group_by of plain keys.
func keys(names ...string) []GroupByKey {
	out := make([]GroupByKey, len(names))
	for i, n := range names {
		out[i] = GroupByKey{Key: n}
	}
	return out
}

// The late-data reasons, as counter attributes and as the value of the late-reason attribute: the
// names of the verdicts.
var (
	reasonExpired = stream.Expired.String()
	reasonFuture  = stream.Future.String()
	reasonInvalid = stream.Invalid.String()
)
