package windowaggregator

import (
	"bytes"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	yaml "go.yaml.in/yaml/v3"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"github.com/windowaggregator/windowaggregator/internal/metadata"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

// FuzzConfig: any YAML either fails to unmarshal or validate, or builds a working component. It never
// panics, and a config that validates always compiles into an engine.
func FuzzConfig(f *testing.F) {
	f.Add("window: {size: 1m, slide: 15s}\naggregations: [{name: a, signal: spans, outputs: [count, p99]}]")
	f.Add("window: {size: 10s}\nallowed_lateness: -1s\naggregations: [{name: a, signal: logs, value: 'attribute:x', outputs: [p999, histogram]}]")
	f.Add("window: {size: 1h}\nwatermark: {idle_timeout: 1s}\nmax_series: 1\naggregations: [{name: a, signal: spans, where: {span_kind: [server], attributes: {k: 1}}, group_by: [span.kind]}]")
	f.Add("window: {size: 10s}\naggregations: [{name: a, signal: logs, weight: 'attribute:rate'}, {name: b, signal: spans, weight: none}]")
	f.Add("window: {size: 10s}\nmax_input_streams: 5\ndrop_aggregated_input: true\naggregations: [{name: a, signal: metrics, where: {metric_names: [m], conditions: ['datapoint.value_double > 1']}, outputs: [sum, histogram], histogram: {explicit: {buckets: [1, 2]}}}]")
	f.Fuzz(func(t *testing.T, doc string) {
		var raw map[string]any
		if yaml.Unmarshal([]byte(doc), &raw) != nil {
			return
		}
		cfg := createDefaultConfig().(*Config)
		if confmap.NewFromStringMap(raw).Unmarshal(cfg) != nil {
			return
		}
		if confmap.Validate(cfg) != nil {
			return
		}
		ecfg := stream.Config{Size: cfg.Window.Size, Slide: cfg.Window.Slide, Offset: cfg.Window.Offset, MaxOutOfOrderness: cfg.Watermark.MaxOutOfOrderness,
			IdleTimeout: cfg.Watermark.IdleTimeout, MaxFutureSkew: cfg.Watermark.MaxFutureSkew, AllowedLateness: cfg.AllowedLateness}
		for i, ac := range cfg.Aggregations {
			a, err := compileAggregation(i, ac, ingest.NewOTTLParsers(ingest.ValidationSettings))
			if err != nil {
				t.Fatalf("a config that validates does not compile: %v\n%s", err, doc)
			}
			ecfg.Aggregations = append(ecfg.Aggregations, a.EngineAggregation(cfg.MaxSeries))
		}
		if _, err := stream.New(ecfg); err != nil {
			t.Fatalf("a config that validates is refused by the engine: %v\n%s", err, doc)
		}
	})
}

// FuzzIngestTraces: arbitrary OTLP trace payloads (tracestates included: spans are weighed by their
// adjusted count) go through the connector, plain and with OTTL conditions, computed keys and a value
// expression, without a panic, in bounded time, and every span is accounted for exactly once in the
// records counter.
func FuzzIngestTraces(f *testing.F) {
	var m ptrace.ProtoMarshaler
	for _, td := range []ptrace.Traces{
		traces(spanSpec{service: "a", name: "/x", end: 1, ms: 10}, spanSpec{service: "b", name: "/y", end: 12, ms: 3}),
		traces(spanSpec{service: "a", name: "/x"}, spanSpec{service: "a", name: "/x", end: 1e12, ms: -5, attrs: map[string]any{"k": []any{1, "x"}}}),
		traces(spanSpec{service: "a", name: "/x", end: 1, ms: 1, id: 7, traceState: "ot=th:9999999999999a"},
			spanSpec{service: "a", name: "/y", end: 2, ms: 2, traceState: "ot=th:zz"}, spanSpec{service: "b", end: 3, traceState: "ot=th:ffffffffffffff"}),
	} {
		b, err := m.MarshalTraces(td)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var u ptrace.ProtoUnmarshaler
		td, err := u.UnmarshalTraces(payload)
		if err != nil {
			return
		}
		checkTracesTaken(t, td)
	})
}

// FuzzTraceFields is FuzzIngestTraces on spans built field by field from the input (see recipe).
func FuzzTraceFields(f *testing.F) {
	addRecipeSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &recipe{b: in}
		checkTracesTaken(t, r.traces())
	})
}

// checkTracesTaken sends td, then most of it again (an upstream's retry, partly late), to a connector
// with plain and OTTL aggregations, each call within a bound of time, and checks that every span is
// counted once a call (the second time as a duplicate, if its first copy was aggregated).
func checkTracesTaken(t *testing.T, td ptrace.Traces) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.AllowedLateness = time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("service.name", "span.name", "k"),
		Outputs: []string{"count", "sum", "p99", "histogram"}},
		{Name: "ottl", Signal: "spans", Outputs: []string{"count", "sum"},
			Where: &WhereConfig{Conditions: []string{`span.kind == SPAN_KIND_SERVER or IsMatch(span.name, "^/x")`,
				`Int(span.attributes["k"]) > 1`}},
			GroupBy: []GroupByKey{{Key: "service.name", Default: "none"}, {Key: "route", OTTL: `Concat([span.name, span.attributes["k"]], " ")`},
				{Key: "k", OTTL: `span.attributes["k"]`, Default: 0}},
			Value: ValueConfig{OTTL: `Double(span.attributes["size"]) * 2.0`}}}
	h := newConnectorHarness(t, cfg, true)
	withinTime(t, td.SpanCount(), h.abandon, func() { h.sendTraces(td) })
	again := resendSubset(td)
	withinTime(t, again.SpanCount(), h.abandon, func() { h.sendTraces(again) })
	checkEveryRecordCounted(t, h, td.SpanCount()+again.SpanCount())
	h.shutdown()
}

// FuzzIngestLogs: arbitrary OTLP log payloads go through the connector, weighed by an attribute,
// without a panic, in bounded time, and every log record is accounted for exactly once.
func FuzzIngestLogs(f *testing.F) {
	var m plog.ProtoMarshaler
	for _, ld := range []plog.Logs{
		logs(logSpec{service: "a", ts: 1, severity: "ERROR", attrs: map[string]any{"size": 10}}, logSpec{service: "b", ts: 12, attrs: map[string]any{"size": "7"}}),
		logs(logSpec{service: "a"}, logSpec{service: "a", observed: 3, attrs: map[string]any{"size": []any{1}}}),
		logs(logSpec{service: "a", ts: 1, attrs: map[string]any{"size": 1, "rate": 0.5}}, logSpec{service: "a", ts: 2, attrs: map[string]any{"rate": "1e20"}},
			logSpec{service: "a", ts: 3, attrs: map[string]any{"rate": -1}}),
	} {
		b, err := m.MarshalLogs(ld)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var u plog.ProtoUnmarshaler
		ld, err := u.UnmarshalLogs(payload)
		if err != nil {
			return
		}
		checkLogsTaken(t, ld)
	})
}

// FuzzLogFields is FuzzIngestLogs on log records built field by field from the input (see recipe).
func FuzzLogFields(f *testing.F) {
	addRecipeSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &recipe{b: in}
		checkLogsTaken(t, r.logs())
	})
}

// checkLogsTaken is checkTracesTaken for logs.
func checkLogsTaken(t *testing.T, ld plog.Logs) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.AllowedLateness = time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "logs", GroupBy: keys("service.name", "severity.text"),
		Value: ValueConfig{Source: "attribute:size"}, Weight: "attribute:rate", Outputs: []string{"count", "sum", "p99"}},
		{Name: "ottl", Signal: "logs", Outputs: []string{"count", "sum"},
			Where:   &WhereConfig{Conditions: []string{`log.severity_number >= SEVERITY_NUMBER_WARN or log.body != ""`}},
			GroupBy: []GroupByKey{{Key: "first", OTTL: `Split(log.body, " ")`}, {Key: "sev", OTTL: `log.severity_text`, Default: "?"}},
			Value:   ValueConfig{OTTL: `Int(log.attributes["size"])`}}}
	cfg.Dedup.Logs = &DedupLogsConfig{Key: []LogPart{"time", "severity", "body", "attributes", "resource", "scope", "trace_id", "span_id"}}
	h := newConnectorHarness(t, cfg, true)
	withinTime(t, ld.LogRecordCount(), h.abandon, func() { h.sendLogs(ld) })
	again := resendSubset(ld)
	withinTime(t, again.LogRecordCount(), h.abandon, func() { h.sendLogs(again) })
	checkEveryRecordCounted(t, h, ld.LogRecordCount()+again.LogRecordCount())
	h.shutdown()
}

// resendSubset is an upstream's retry of part of a batch: a copy of it without every third record.
func resendSubset[B interface {
	ptrace.Traces | plog.Logs
}](b B) B {
	n := 0
	keep := func() bool { n++; return n%3 == 0 }
	switch b := any(b).(type) {
	case ptrace.Traces:
		c := ptrace.NewTraces()
		b.CopyTo(c)
		for i := 0; i < c.ResourceSpans().Len(); i++ {
			for j := 0; j < c.ResourceSpans().At(i).ScopeSpans().Len(); j++ {
				c.ResourceSpans().At(i).ScopeSpans().At(j).Spans().RemoveIf(func(ptrace.Span) bool { return keep() })
			}
		}
		return any(c).(B)
	default:
		l := b.(plog.Logs)
		c := plog.NewLogs()
		l.CopyTo(c)
		for i := 0; i < c.ResourceLogs().Len(); i++ {
			for j := 0; j < c.ResourceLogs().At(i).ScopeLogs().Len(); j++ {
				c.ResourceLogs().At(i).ScopeLogs().At(j).LogRecords().RemoveIf(func(plog.LogRecord) bool { return keep() })
			}
		}
		return any(c).(B)
	}
}

// checkEveryRecordCounted fails t unless the records counter, over all its outcomes, adds up to want.
func checkEveryRecordCounted(t *testing.T, h *connectorHarness, want int) {
	t.Helper()
	var total int64
	for _, outcome := range []string{"aggregated", "late_updated", "late", "unmatched"} {
		total += counterValue(t, h.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": outcome})
	}
	total += counterIncluding(t, h.tel, "otelcol_window_aggregator_duplicate_records", nil) // copies of records aggregated before
	if total != int64(want) {
		t.Fatalf("records counted %d, want %d", total, want)
	}
}

// FuzzIngestMetrics: arbitrary OTLP metric payloads go through the processor, which drops the points
// it takes, without a panic and in bounded time; every point of a metric an aggregation names is
// accounted for exactly once (records by outcome, or metric_points for the points taken without a
// record), and the points removed are exactly those taken. Its seeds hold the points that once
// crashed or hung the collector.
func FuzzIngestMetrics(f *testing.F) {
	var m pmetric.ProtoMarshaler
	six := inHist{count: 6, sum: 6, bounds: fuzzBounds, buckets: []uint64{1, 1, 1, 1, 1, 1}}
	for _, md := range []pmetric.Metrics{
		inMetrics(inPoint{service: "a", pod: "p", metric: "m", kind: inCounter, start: 1000, t: 1001, v: 3},
			inPoint{service: "a", pod: "p", metric: "m", kind: inCounter, start: 1000, t: 1002, v: 1},
			inPoint{service: "b", pod: "p", metric: "n", kind: inGauge, t: 1003, v: 2, attrs: map[string]any{"k": "x"}}),
		inMetrics(inPoint{service: "a", pod: "p", metric: "m", kind: inCumulativeExponential, start: 900, t: 1001,
			hist: &inHist{count: 3, sum: 4, scale: 2, offset: -3, buckets: []uint64{1, 0, 2}}},
			inPoint{service: "a", pod: "p", metric: "n", kind: inHistogram, t: 1002, hist: &inHist{count: 2, sum: 1, bounds: []float64{0}, buckets: []uint64{1, 1}}},
			inPoint{service: "a", pod: "p", metric: "n", kind: inSummary, t: 1002, v: 1}),
		// Once a crash: one bucket count more than the bounds allow; and two of them.
		inMetrics(inPoint{service: "a", pod: "p", metric: "n", kind: inHistogram, t: 1002, hist: &six},
			inPoint{service: "a", pod: "q", metric: "n", kind: inHistogram, t: 1002, hist: &inHist{count: 4, sum: 2, bounds: six.bounds, buckets: []uint64{2, 2}}}),
		// Once hangs: offsets of -2^31, on either side; two points of one series 10^7 buckets apart.
		inMetrics(inPoint{service: "a", pod: "p", metric: "m", kind: inExponential, t: 1001, hist: &inHist{count: 1, sum: 1, offset: math.MinInt32, buckets: []uint64{1}}},
			inPoint{service: "a", pod: "q", metric: "m", kind: inExponential, t: 1001, hist: &inHist{count: 1, sum: -1, negOffset: math.MinInt32, negBuckets: []uint64{1}}}),
		inMetrics(inPoint{service: "a", pod: "p", metric: "m", kind: inExponential, t: 1001, hist: &inHist{count: 1, sum: 1, buckets: []uint64{1}}},
			inPoint{service: "a", pod: "p", metric: "m", kind: inExponential, t: 1002, hist: &inHist{count: 1, sum: 1, offset: 10_000_000, buckets: []uint64{1}}}),
		// A value from nothing, a negative increase and a count past int64.
		inMetrics(inPoint{service: "a", pod: "p", metric: "m", kind: inGauge, t: 1001, unset: true},
			inPoint{service: "a", pod: "p", metric: "n", kind: inDeltaSum, t: 1001, v: -3},
			inPoint{service: "a", pod: "q", metric: "n", kind: inHistogram, t: 1002, hist: &inHist{count: 1<<63 + 5, sum: 1, bounds: []float64{1}, buckets: []uint64{1<<63 + 5, 0}}}),
	} {
		b, err := m.MarshalMetrics(md)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var u pmetric.ProtoUnmarshaler
		md, err := u.UnmarshalMetrics(payload)
		if err != nil {
			return
		}
		checkMetricsTaken(t, md)
	})
}

// FuzzMetricFields is FuzzIngestMetrics on points built field by field from the input (see recipe):
// every kind, temporality, length, offset, scale, flag and value free.
func FuzzMetricFields(f *testing.F) {
	addRecipeSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &recipe{b: in}
		checkMetricsTaken(t, r.metrics())
	})
}

// addRecipeSeeds adds inputs that the recipes read as batches of every kind: nothing but zeros,
// nothing but extremes, and a sweep of byte values.
func addRecipeSeeds(f *testing.F) {
	sweep := make([]byte, 512)
	for i := range sweep {
		sweep[i] = byte(i * 37)
	}
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 256))
	f.Add(bytes.Repeat([]byte{1, 2, 0xf5, 0xff, 0x80, 0, 3}, 64))
	f.Add(sweep)
}

// checkMetricsTaken sends md twice (the second time partly late) to the processor with an
// exponential (m) and an explicit (n) aggregation, which drops the points it takes, each call within
// a bound of time, and checks that every listed point is accounted for once a call and that the
// points removed are those taken.
func checkMetricsTaken(t *testing.T, md pmetric.Metrics) {
	cfg := baseConfig()
	cfg.AllowedLateness = time.Second
	cfg.DropAggregatedInput = true
	cfg.Aggregations = []AggregationConfig{{Name: "a", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"m"},
		Conditions: []string{`datapoint.attributes["k"] != "x" or metric.name == "m"`}},
		GroupBy: keys("service.name", "k"), Outputs: []string{"count", "sum", "min", "max", "p99", "histogram"}},
		{Name: "b", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"n"}}, GroupBy: keys("service.name"),
			Outputs:   []string{"count", "sum", "avg", "min", "max", "histogram"},
			Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{0.1, 0.5, 1, 5}}}}} // fuzzBounds
	r := startMetrics(t, "processor", cfg, nil)
	var listed, removed int
	for range 2 {
		in := pmetric.NewMetrics()
		md.CopyTo(in)
		for i := 0; i < in.ResourceMetrics().Len(); i++ {
			for j := 0; j < in.ResourceMetrics().At(i).ScopeMetrics().Len(); j++ {
				sm := in.ResourceMetrics().At(i).ScopeMetrics().At(j)
				for k := 0; k < sm.Metrics().Len(); k++ {
					if mt := sm.Metrics().At(k); sm.Scope().Name() != metadata.ScopeName && (mt.Name() == "m" || mt.Name() == "n") {
						listed += pointsOf(mt)
					}
				}
			}
		}
		before := in.DataPointCount()
		withinTime(t, before, func() { r.comp = nil }, func() { r.send(in) })
		removed += before - in.DataPointCount()
	}
	counted, taken := int64(0), int64(0)
	for _, outcome := range []string{"aggregated", "late_updated", "late", "unmatched"} {
		n := counterValue(t, r.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": outcome})
		counted += n
		if outcome == "aggregated" || outcome == "late_updated" {
			taken += n
		}
	}
	duplicates := counterIncluding(t, r.tel, "otelcol_window_aggregator_duplicate_records", nil) // taken before: removed again
	counted, taken = counted+duplicates, taken+duplicates
	for _, agg := range []string{"a", "b"} {
		for o := metricinput.Base; o < metricinput.NumOutcomes; o++ {
			n := pointsCounter(t, r.tel, agg, metricinput.OutcomeNames[o])
			counted += n
			if o.Held() {
				taken += n
			}
		}
	}
	if counted != int64(listed) || taken != int64(removed) {
		t.Fatalf("%d points listed, %d accounted for; %d removed, %d taken", listed, counted, removed, taken)
	}
	r.stop()
}

// pointsOf is the number of data points of metric m.
func pointsOf(m pmetric.Metric) int {
	md := pmetric.NewMetrics()
	m.CopyTo(md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty())
	return md.DataPointCount()
}
