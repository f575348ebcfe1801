package windowaggregator

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
)

// Dedup through the factories: records delivered twice (a batch resent whole, split into other
// batches, repeated within a batch, through other pipelines, after a restart) are counted once, in
// both forms and both output modes. Every expectation is worked out by hand in the comments.

// dedupModes are the output modes the dedup tests run in: delta points whose late firings revise,
// and cumulative points.
var dedupModes = []struct {
	temporality Temporality
	late        LateFirings
}{{temporalityDelta, lateRevise}, {temporalityCumulative, lateFold}}

// dedupConfig is a 10 s tumbling window, 5 s allowed lateness, and one span aggregation by service
// of count and sum (ms).
func dedupConfig(temporality Temporality, late LateFirings) *Config {
	cfg := baseConfig()
	cfg.Temporality, cfg.LateFirings = temporality, late
	cfg.AllowedLateness = 5 * time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count", "sum"}}}
	return cfg
}

// spansRun is one component id fed spans the way the collector feeds it: the connector's
// traces->metrics and traces->traces instances each handed every batch (the fan-out), or the
// processor in a traces pipeline with its results in a metrics pipeline; more pipelines into the same
// id can be added (pipeline).
type spansRun struct {
	t       *testing.T
	form    string
	cfg     *Config
	host    component.Host
	id      component.ID // every instance's, so that they share one state
	tel     *componenttest.Telemetry
	results *consumertest.MetricsSink
	late    *consumertest.TracesSink // the connector's routed late spans
	passed  *consumertest.TracesSink // what the processor passed on
	comps   []component.Component
	feeds   [][]func(context.Context, ptrace.Traces) error // by pipeline, its instances
}

func startSpans(t *testing.T, form string, cfg *Config, host component.Host) *spansRun {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if host == nil {
		host = componenttest.NewNopHost()
	}
	r := &spansRun{t: t, form: form, cfg: cfg, host: host, tel: componenttest.NewTelemetry(), results: new(consumertest.MetricsSink),
		late: new(consumertest.TracesSink), passed: new(consumertest.TracesSink)}
	ctx := testContext(t)
	switch form {
	case "connector":
		set := connectortest.NewNopSettings(Type)
		set.TelemetrySettings = r.tel.NewTelemetrySettings()
		r.id = set.ID
		f := NewConnectorFactory()
		t2m, err := f.CreateTracesToMetrics(ctx, set, cfg, r.results)
		must(t, err)
		t2t, err := f.CreateTracesToTraces(ctx, set, cfg, r.late)
		must(t, err)
		r.comps = append(r.comps, t2m, t2t)
		r.feeds = append(r.feeds, []func(context.Context, ptrace.Traces) error{t2m.ConsumeTraces, t2t.ConsumeTraces})
	default:
		set := processortest.NewNopSettings(Type)
		set.TelemetrySettings = r.tel.NewTelemetrySettings()
		r.id = set.ID
		m, err := NewFactory().CreateMetrics(ctx, set, cfg, r.results)
		must(t, err)
		r.comps = append(r.comps, m)
		r.pipeline()
	}
	for _, c := range r.comps {
		must(t, c.Start(ctx, host))
	}
	t.Cleanup(r.stop)
	return r
}

// pipeline adds a traces pipeline with the processor of the run's id in it (for the connector too:
// a processor and a connector with one id share its state, the processor's results going through a
// metrics pipeline with it), and returns its index in feeds.
func (r *spansRun) pipeline() int {
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = r.tel.NewTelemetrySettings()
	set.ID = r.id
	ctx := testContext(r.t)
	started := len(r.feeds) > 0 // else started with the run
	if r.form == "connector" {  // its results go to every metrics consumer: these are read from the connector's
		m, err := NewFactory().CreateMetrics(ctx, set, r.cfg, new(consumertest.MetricsSink))
		must(r.t, err)
		must(r.t, m.Start(ctx, r.host))
		r.comps = append(r.comps, m)
	}
	p, err := NewFactory().CreateTraces(ctx, set, r.cfg, r.passed)
	must(r.t, err)
	if started {
		must(r.t, p.Start(ctx, r.host))
	}
	r.comps = append(r.comps, p)
	r.feeds = append(r.feeds, []func(context.Context, ptrace.Traces) error{p.ConsumeTraces})
	return len(r.feeds) - 1
}

// send hands td to every instance of the first pipeline.
func (r *spansRun) send(td ptrace.Traces) { r.sendTo(0, td) }

func (r *spansRun) sendTo(pipeline int, td ptrace.Traces) {
	r.t.Helper()
	for _, feed := range r.feeds[pipeline] {
		must(r.t, feed(context.Background(), td))
	}
	settleAll(r.t)
}

func (r *spansRun) stop() {
	for _, c := range r.comps {
		must(r.t, c.Shutdown(context.Background()))
	}
	r.comps = nil
}

// windowValues returns metric's value per series for the window that ends at end: with delta points
// the window's (first and late firings added up), with cumulative ones the last total up to it.
func windowValues(ps []point, metric string, end int64, cumulative bool) map[string]float64 {
	got := map[string]float64{}
	for _, p := range ps {
		if p.metric != metric || p.end != end {
			continue
		}
		if cumulative {
			got[p.attrs] = p.value
		} else {
			got[p.attrs] += p.value
		}
	}
	return got
}

func wantValues(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func (r *spansRun) counter(name string, attrs map[string]string) int64 {
	return counterValue(r.t, r.tel, "otelcol_window_aggregator_"+name, attrs)
}

func eachDedupCase(t *testing.T, fn func(t *testing.T, form string, cfg *Config)) {
	for _, form := range forms {
		for _, mode := range dedupModes {
			t.Run(fmt.Sprintf("%s/%s-%s", form, mode.temporality, mode.late), func(t *testing.T) {
				useFakeClock(t)
				fn(t, form, dedupConfig(mode.temporality, mode.late))
			})
		}
	}
}

var spansSignal = map[string]string{"signal": "spans"}

// A batch of three spans in [0, 10 s) — 1 (a, 10 ms), 2 (a, 20 ms), 3 (b, 30 ms) — sent, sent again
// whole, then again split into two other batches in another order; then a batch that holds span 4
// (a, 40 ms) twice; then span 99 (c) at 16 s, which closes the window (W 16 ≥ 10 + 5).
//
// Counted once each: a count 3 (1, 2, 4) sum 70; b count 1 sum 30. Duplicates: 3 + 3 + 1 = 7. The
// connector routes nothing as late; the processor passes all 12 spans on.
func TestResentSpansAreCountedOnce(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		r := startSpans(t, form, cfg, nil)
		one := spanSpec{service: "a", name: "x", end: 1, ms: 10, id: 1}
		two := spanSpec{service: "a", name: "x", end: 2, ms: 20, id: 2}
		three := spanSpec{service: "b", name: "x", end: 3, ms: 30, id: 3}
		four := spanSpec{service: "a", name: "x", end: 4, ms: 40, id: 4}
		r.send(traces(one, two, three))
		r.send(traces(one, two, three))
		r.send(traces(three, one))
		r.send(traces(two))
		r.send(traces(four, four))
		r.send(traces(spanSpec{service: "c", name: "x", end: 16, ms: 1, id: 99}))
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 3, svcB: 1})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 70, svcB: 30})
		if got := r.counter("duplicate_records", spansSignal); got != 7 {
			t.Errorf("duplicate_records = %d, want 7", got)
		}
		if got := r.counter("records", map[string]string{"outcome": "aggregated"}); got != 5 {
			t.Errorf("records{aggregated} = %d, want 5 (four spans and the closer)", got)
		}
		if n := r.late.SpanCount(); n != 0 {
			t.Errorf("%d spans routed as late, want none", n)
		}
		if form == "processor" && r.passed.SpanCount() != 12 {
			t.Errorf("the processor passed %d spans on, want all 12", r.passed.SpanCount())
		}
	})
}

// Not copies: span 5 as a server and as a client (one span id shared, as Zipkin's clients and servers
// do); a span without ids (1 ms), and one with a trace id but no span id (2 ms), each sent twice. All
// six are counted: a count 6, sum 5 + 5 + 2 × 1 + 2 × 2 = 16; no duplicate.
func TestSpansThatAreNotCopies(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		r := startSpans(t, form, cfg, nil)
		r.send(traces(spanSpec{service: "a", end: 1, ms: 5, id: 5, kind: ptrace.SpanKindServer},
			spanSpec{service: "a", end: 1, ms: 5, id: 5, kind: ptrace.SpanKindClient}))
		noIDs := traces(spanSpec{service: "a", end: 2, ms: 1})
		noSpanID := traces(spanSpec{service: "a", end: 3, ms: 2})
		tr, _ := spanIDs(6)
		noSpanID.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetTraceID(tr)
		for range 2 {
			r.send(noIDs)
			r.send(noSpanID)
		}
		r.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 6})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 16})
		if got := r.counter("duplicate_records", spansSignal); got != 0 {
			t.Errorf("duplicate_records = %d, want 0", got)
		}
	})
}

// A batch's identities are read ahead of its spans, resource by resource: spans without ids among
// spans with them, in two resources, then the same batch reordered. Service a: a span without ids
// (1 ms) and span 7 (10 ms); service b: one without ids (2 ms) and span 8 (20 ms). The second batch
// holds 8, a's span without ids and 7: 7 and 8 are duplicates, the span without ids is counted again.
// Span 9, without a timestamp, is looked up in neither batch (its time is invalid): it leaves a gap
// among the identities claimed. a: count 3, sum 1 + 10 + 1 = 12; b: count 2, sum 22; two duplicates.
func TestIdentitiesFollowTheirSpans(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		r := startSpans(t, form, cfg, nil)
		noIDsA := spanSpec{service: "a", end: 1, ms: 1}
		seven := spanSpec{service: "a", end: 2, ms: 10, id: 7}
		nine := spanSpec{service: "b", id: 9}
		r.send(traces(noIDsA, seven, spanSpec{service: "b", end: 3, ms: 2}, nine, spanSpec{service: "b", end: 4, ms: 20, id: 8}))
		r.send(traces(nine, spanSpec{service: "b", end: 4, ms: 20, id: 8}, noIDsA, seven))
		r.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 3, svcB: 2})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 12, svcB: 22})
		if got := r.counter("duplicate_records", spansSignal); got != 2 {
			t.Errorf("duplicate_records = %d, want 2", got)
		}
	})
}

// A span sampled at 25% (adjusted count 4, 10 ms) sent three times counts for 4 spans, 40 ms, once.
func TestResentSampledSpanWeighsOnce(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		r := startSpans(t, form, cfg, nil)
		sampled := traces(spanSpec{service: "a", end: 1, ms: 10, id: 7, traceState: sampledQuarter})
		for range 3 {
			r.send(sampled)
		}
		r.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 4})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 40})
		if got := r.counter("duplicate_records", spansSignal); got != 2 {
			t.Errorf("duplicate_records = %d, want 2", got)
		}
	})
}

// One component id in three places: the connector and the processor in two traces pipelines (the
// connector's run sends through the second pipeline twice). A batch of spans 1 and 2 (a, 10 and 20
// ms) through each: counted once (a count 2, sum 30); the later sends' spans are duplicates: 2 × 2
// for the processor's run, 2 × 3 for the connector's.
func TestCopiesThroughOtherPipelinesIntoOneID(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		r := startSpans(t, form, cfg, nil)
		other := r.pipeline()
		batch := traces(spanSpec{service: "a", end: 1, ms: 10, id: 1}, spanSpec{service: "a", end: 2, ms: 20, id: 2})
		r.send(batch)
		r.sendTo(other, batch)
		if form == "processor" { // and the connector of the same id
			set := connectortest.NewNopSettings(Type)
			set.TelemetrySettings = r.tel.NewTelemetrySettings()
			set.ID = r.id
			c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, new(consumertest.MetricsSink)) // results read from the processor's
			must(t, err)
			must(t, c.Start(testContext(t), r.host))
			r.comps = append(r.comps, c)
			r.feeds = append(r.feeds, []func(context.Context, ptrace.Traces) error{c.ConsumeTraces})
		} else {
			r.sendTo(other, batch)
		}
		r.sendTo(len(r.feeds)-1, batch)
		r.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 2})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 30})
		want := int64(4)
		if form == "connector" {
			want = 6
		}
		if got := r.counter("duplicate_records", spansSignal); got != want {
			t.Errorf("duplicate_records = %d, want %d", got, want)
		}
	})
}

// OTTL conditions are not run on a duplicate: the first condition fails on every span ("x" is no
// int; error_mode ignore counts it), the second is true. Span 1 sent three times: one OTTL error.
func TestNoConditionRunsOnADuplicate(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		cfg.Aggregations[0].Where = &WhereConfig{Conditions: []string{`Int(span.attributes["n"]) > 0`, `span.name == "x"`}}
		r := startSpans(t, form, cfg, nil)
		batch := traces(spanSpec{service: "a", name: "x", end: 1, ms: 10, id: 1, attrs: map[string]any{"n": "x"}})
		for range 3 {
			r.send(batch)
		}
		if got := counterIncluding(t, r.tel, "otelcol_window_aggregator_ottl_errors", nil); got != 1 {
			t.Errorf("ottl_errors = %d, want 1: the conditions ran on a duplicate", got)
		}
		if got := r.counter("duplicate_records", spansSignal); got != 2 {
			t.Errorf("duplicate_records = %d, want 2", got)
		}
	})
}

// With dedup.enabled false every copy counts, as before dedup: span 1 (10 ms) sent twice, a count 2
// sum 20, and nothing counted as a duplicate.
func TestDedupDisabledCountsEveryCopy(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		cfg.Dedup.Enabled = false
		r := startSpans(t, form, cfg, nil)
		batch := traces(spanSpec{service: "a", end: 1, ms: 10, id: 1})
		r.send(batch)
		r.send(batch)
		r.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 2})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 20})
		if _, err := r.tel.GetMetric("otelcol_window_aggregator_duplicate_records"); err == nil {
			t.Error("duplicate_records reported with dedup disabled")
		}
	})
}

// max_ids 2: spans 1 and 2 are remembered, span 3 is not (dedup_overflow 1) and is aggregated as
// without dedup. Resent: 1 and 2 are duplicates, 3 is counted again (dedup_overflow 2). b (span 3,
// 30 ms) count 2 sum 60; a (10 and 20 ms) count 2 sum 30. The gauge of remembered identities says 2.
func TestPastMaxIDsNothingIsDroppedAsADuplicate(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		cfg.Dedup.MaxIDs = 2
		r := startSpans(t, form, cfg, nil)
		batch := traces(spanSpec{service: "a", end: 1, ms: 10, id: 1}, spanSpec{service: "a", end: 2, ms: 20, id: 2},
			spanSpec{service: "b", end: 3, ms: 30, id: 3})
		r.send(batch)
		r.send(batch)
		if got, _ := gaugeValue(t, r.tel, "otelcol_window_aggregator_dedup_identities", "", ""); got != 2 {
			t.Errorf("dedup_identities = %v, want 2", got)
		}
		r.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 2, svcB: 2})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 30, svcB: 60})
		if got := r.counter("duplicate_records", spansSignal); got != 2 {
			t.Errorf("duplicate_records = %d, want 2", got)
		}
		// and the closer, 99, finds the set full too
		if got := r.counter("dedup_overflow", spansSignal); got != 3 {
			t.Errorf("dedup_overflow = %d, want 3", got)
		}
	})
}

// A copy that comes after W has passed its window's end plus allowed_lateness is late data, not a
// duplicate: span 1 at 1 s, then span 99 at 16 s (W 16 ≥ 10 + 5: [0, 10) expired), then span 1
// again: expired (the connector routes it again; the processor passes it). a count 1 sum 10.
func TestACopyAfterTheLatenessIsLate(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		r := startSpans(t, form, cfg, nil)
		batch := traces(spanSpec{service: "a", end: 1, ms: 10, id: 1})
		r.send(batch)
		r.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		r.send(batch)
		ps := points(r.results.AllMetrics())
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 1})
		if got := r.counter("duplicate_records", spansSignal); got != 0 {
			t.Errorf("duplicate_records = %d, want 0", got)
		}
		action := "passed"
		if form == "connector" {
			action = "routed"
			if n := r.late.SpanCount(); n != 1 {
				t.Errorf("%d spans routed as late, want the copy", n)
			}
		}
		if got := r.counter("late_records", map[string]string{"reason": "expired", "action": action}); got != 1 {
			t.Errorf("late_records{expired, %s} = %d, want 1", action, got)
		}
	})
}

// A restart with storage, then the upstream's replay: spans 1, 2 (a) and 3 (b) aggregated and
// checkpointed at shutdown; after the restart the same batch again, then the closer. Counted once:
// a count 2 sum 30, b count 1 sum 30; the replay's three spans are duplicates.
func TestReplayAfterARestartIsCountedOnce(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, form string, cfg *Config) {
		cfg.Storage = &storageID
		host := hostWith{storageID: &memStorage{data: map[string][]byte{}}}
		batch := traces(spanSpec{service: "a", end: 1, ms: 10, id: 1}, spanSpec{service: "a", end: 2, ms: 20, id: 2},
			spanSpec{service: "b", end: 3, ms: 30, id: 3})
		first := startSpans(t, form, cfg, host)
		first.send(batch)
		first.stop()
		second := startSpans(t, form, cfg, host)
		second.send(batch)
		second.send(traces(spanSpec{service: "c", end: 16, ms: 1, id: 99}))
		second.stop()
		ps := points(append(first.results.AllMetrics(), second.results.AllMetrics()...))
		cumulative := cfg.Temporality == temporalityCumulative
		wantValues(t, "lat.count", windowValues(ps, "lat.count", 10, cumulative), map[string]float64{svcA: 2, svcB: 1})
		wantValues(t, "lat.sum", windowValues(ps, "lat.sum", 10, cumulative), map[string]float64{svcA: 30, svcB: 30})
		if got := second.counter("duplicate_records", spansSignal); got != 3 {
			t.Errorf("duplicate_records after the restart = %d, want 3", got)
		}
	})
}

// Logs: without dedup.logs.key, a log record sent twice counts twice; with key [time, attributes],
// a copy counts once, and a record at the same time with other attributes is not a copy.
//
// Sent twice: (a, 1 s, {k: 1}), (a, 1 s, {k: 2}), (a, 2 s, {k: 1}). With the key: a count 3;
// without: 6.
func TestResentLogRecords(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("key=%v", keyed), func(t *testing.T) {
			useFakeClock(t)
			cfg := baseConfig()
			cfg.AllowedLateness = 5 * time.Second
			cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "logs", GroupBy: keys("service.name"), Outputs: []string{"count"}}}
			if keyed {
				cfg.Dedup.Logs = &DedupLogsConfig{Key: []LogPart{"time", "attributes"}}
			}
			h := newConnectorHarness(t, cfg, true)
			batch := logs(logSpec{service: "a", ts: 1, attrs: map[string]any{"k": 1}}, logSpec{service: "a", ts: 1, attrs: map[string]any{"k": 2}},
				logSpec{service: "a", ts: 2, attrs: map[string]any{"k": 1}})
			h.sendLogs(batch)
			h.sendLogs(batch)
			h.sendLogs(logs(logSpec{service: "c", ts: 16}))
			want, dups := 6.0, int64(0)
			if keyed {
				want, dups = 3, 3
			}
			wantPoint(t, points(h.metrics.AllMetrics()), "n.count", svcA, 0, 10, want)
			if got := counterIncluding(t, h.tel, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "logs"}); got != dups {
				t.Errorf("duplicate_records{logs} = %d, want %d", got, dups)
			}
		})
	}
}

// Metric points: a gauge point (depth 5 at 1 s) and a delta sum point (bytes 7 at 1 s) resent are
// added once; the gauge of another stream (pod q) at the same time is not a copy. depth count 2 sum
// 5 + 6 = 11; bytes count 1 sum 7; two duplicates.
func TestResentGaugeAndDeltaPoints(t *testing.T) {
	for _, form := range forms {
		for _, mode := range dedupModes {
			t.Run(fmt.Sprintf("%s/%s", form, mode.temporality), func(t *testing.T) {
				cfg := metricsConfig(
					AggregationConfig{Name: "depth", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"depth"}}, Outputs: []string{"count", "sum"}},
					AggregationConfig{Name: "bytes", Signal: "metrics", Where: &WhereConfig{MetricNames: []string{"bytes"}}, Outputs: []string{"count", "sum"}})
				cfg.Temporality, cfg.LateFirings = mode.temporality, mode.late
				r := startMetrics(t, form, cfg, nil)
				r.at(1010)
				batch := inMetrics(inPoint{service: "a", pod: "p", metric: "depth", kind: inGauge, t: 1001, v: 5},
					inPoint{service: "a", pod: "p", metric: "bytes", kind: inDeltaSum, t: 1001, v: 7})
				r.send(batch)
				r.send(batch)
				r.send(inMetrics(inPoint{service: "a", pod: "q", metric: "depth", kind: inGauge, t: 1001, v: 6}))
				r.stop()
				cumulative := mode.temporality == temporalityCumulative
				ps := r.points()
				wantValues(t, "depth.count", windowValues(ps, "depth.count", 1010, cumulative), map[string]float64{"": 2})
				wantValues(t, "depth.sum", windowValues(ps, "depth.sum", 1010, cumulative), map[string]float64{"": 11})
				wantValues(t, "bytes.sum", windowValues(ps, "bytes.sum", 1010, cumulative), map[string]float64{"": 7})
				if got := counterValue(t, r.tel, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "metrics"}); got != 2 {
					t.Errorf("duplicate_records{metrics} = %d, want 2", got)
				}
			})
		}
	}
}

// Log bodies that their JSON text would confuse are other records: maps that differ only where a
// NaN stands (JSON cannot write it), an int and a double of one value, a slice of two strings and
// one of their concatenation. Six records at one time with key [time, body]: six counted; the first
// resent: one duplicate.
func TestLogBodiesAreIdentifiedByTypeAndValue(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "logs", Outputs: []string{"count"}}}
	cfg.Dedup.Logs = &DedupLogsConfig{Key: []LogPart{"time", "body"}}
	h := newConnectorHarness(t, cfg, true)
	ld := plog.NewLogs()
	records := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	body := func() pcommon.Value {
		lr := records.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(1 * s))
		return lr.Body()
	}
	m := body().SetEmptyMap()
	m.PutStr("msg", "a")
	m.PutDouble("v", math.NaN())
	m = body().SetEmptyMap()
	m.PutStr("msg", "b")
	m.PutDouble("v", math.NaN())
	body().SetInt(1)
	body().SetDouble(1)
	sl := body().SetEmptySlice()
	sl.AppendEmpty().SetStr("a")
	sl.AppendEmpty().SetStr("b")
	body().SetEmptySlice().AppendEmpty().SetStr("ab")
	h.sendLogs(ld)
	again := plog.NewLogs()
	ld.ResourceLogs().At(0).CopyTo(again.ResourceLogs().AppendEmpty())
	again.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return lr.Body().Type() != pcommon.ValueTypeMap })
	again.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
		v, _ := lr.Body().Map().Get("msg")
		return v.Str() != "a"
	})
	h.sendLogs(again)
	h.sendLogs(logs(logSpec{service: "c", ts: 16}))
	wantPoint(t, points(h.metrics.AllMetrics()), "n.count", "", 0, 10, 6)
	if got := counterIncluding(t, h.tel, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "logs"}); got != 1 {
		t.Errorf("duplicate_records{logs} = %d, want 1", got)
	}
}
