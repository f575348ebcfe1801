package windowaggregator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// OTTL through the factories, in both forms: where.conditions, group_by keys with defaults and
// computed ones, value expressions, and error_mode. Every expectation is worked out by hand in the
// comments; each configuration has 10 s tumbling windows with delta points (baseConfig), and each
// test's last batch (at 12 s) closes [0, 10).

// forms are the component's two forms.
var forms = []string{"connector", "processor"}

// formRun is what one form made of some batches, until it shut down: the result points, its
// telemetry, the errors its consume calls returned, and its logs.
type formRun struct {
	all    []pmetric.Metrics
	points []point
	tel    *componenttest.Telemetry
	errs   []error
	logs   *observer.ObservedLogs
}

// runIn feeds batches (ptrace.Traces and plog.Logs) to cfg's component in form: the connector's
// traces->metrics and logs->metrics instances, or the processor's traces, logs and metrics ones, each
// batch to every instance of its signal.
func runIn(t *testing.T, form string, cfg *Config, batches ...any) formRun {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	run := formRun{tel: componenttest.NewTelemetry(), logs: logs}
	set := run.tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	sink := new(consumertest.MetricsSink)
	ctx := testContext(t)
	var consumeTraces []func(context.Context, ptrace.Traces) error
	var consumeLogs []func(context.Context, plog.Logs) error
	var started []interface{ Shutdown(context.Context) error }
	switch form {
	case "connector":
		f := NewConnectorFactory()
		cs := connectortest.NewNopSettings(Type)
		cs.TelemetrySettings = set
		t2m, err := f.CreateTracesToMetrics(ctx, cs, cfg, sink)
		must(t, err)
		l2m, err := f.CreateLogsToMetrics(ctx, cs, cfg, sink)
		must(t, err)
		consumeTraces, consumeLogs = append(consumeTraces, t2m.ConsumeTraces), append(consumeLogs, l2m.ConsumeLogs)
		must(t, t2m.Start(ctx, componenttest.NewNopHost()))
		must(t, l2m.Start(ctx, componenttest.NewNopHost()))
		started = append(started, t2m, l2m)
	default:
		f := NewFactory()
		ps := processortest.NewNopSettings(Type)
		ps.TelemetrySettings = set
		mp, err := f.CreateMetrics(ctx, ps, cfg, sink)
		must(t, err)
		tp, err := f.CreateTraces(ctx, ps, cfg, consumertest.NewNop())
		must(t, err)
		lp, err := f.CreateLogs(ctx, ps, cfg, consumertest.NewNop())
		must(t, err)
		consumeTraces, consumeLogs = append(consumeTraces, tp.ConsumeTraces), append(consumeLogs, lp.ConsumeLogs)
		must(t, mp.Start(ctx, componenttest.NewNopHost()))
		must(t, tp.Start(ctx, componenttest.NewNopHost()))
		must(t, lp.Start(ctx, componenttest.NewNopHost()))
		started = append(started, tp, lp, mp)
	}
	for _, batch := range batches {
		switch b := batch.(type) {
		case ptrace.Traces:
			for _, c := range consumeTraces {
				if err := c(context.Background(), b); err != nil {
					run.errs = append(run.errs, err)
				}
			}
		case plog.Logs:
			for _, c := range consumeLogs {
				if err := c(context.Background(), b); err != nil {
					run.errs = append(run.errs, err)
				}
			}
		}
		settleAll(t)
	}
	for _, c := range started {
		must(t, c.Shutdown(context.Background()))
	}
	run.all = sink.AllMetrics() // the windows that fired, and those still open at shutdown (no storage)
	run.points = points(run.all)
	return run
}

// ottlConfig is baseConfig with aggregations aggs.
func ottlConfig(aggs ...AggregationConfig) *Config {
	cfg := baseConfig()
	cfg.Aggregations = aggs
	return cfg
}

// closer is a record at 12 s, of service "closer", that the test's aggregations select: accepted, it
// moves the watermark past 10 s, and [0, 10) fires.
func closerSpan(attrs map[string]any) ptrace.Traces {
	return traces(spanSpec{service: "closer", name: "close", end: 12, ms: 1, kind: ptrace.SpanKindServer, attrs: attrs})
}

// Conditions: any one true selects a span, and every other clause of where must hold too.
//
//	span  kind    http.route  tier  status  cond 1 (server, not /health)  cond 2 (error)  tier web  selected
//	1     server  /api        web   unset   true                          false           yes       yes
//	2     server  /health     web   unset   false                         false           yes       no
//	3     client  /api        web   error   false                         true            yes       yes
//	4     server  /api        db    unset   true                          false           no        no
//	5     server  (none)      web   unset   true (nil is not "/health")   false           yes       yes
//
// count 3 for service a; the closer's service is selected by no condition (kind internal).
func TestConditionsSelectSpans(t *testing.T) {
	srv, cli := ptrace.SpanKindServer, ptrace.SpanKindClient
	cfg := ottlConfig(AggregationConfig{Name: "req", Signal: "spans", GroupBy: keys("service.name"),
		Where: &WhereConfig{
			Conditions: []string{`span.kind == SPAN_KIND_SERVER and span.attributes["http.route"] != "/health"`,
				`span.status.code == STATUS_CODE_ERROR`},
			Attributes: map[string]any{"tier": "web"},
		}})
	batch := traces(
		spanSpec{service: "a", end: 1, kind: srv, attrs: map[string]any{"http.route": "/api", "tier": "web"}},
		spanSpec{service: "a", end: 2, kind: srv, attrs: map[string]any{"http.route": "/health", "tier": "web"}},
		spanSpec{service: "a", end: 3, kind: cli, status: ptrace.StatusCodeError, attrs: map[string]any{"http.route": "/api", "tier": "web"}},
		spanSpec{service: "a", end: 4, kind: srv, attrs: map[string]any{"http.route": "/api", "tier": "db"}},
		spanSpec{service: "a", end: 5, kind: srv, attrs: map[string]any{"tier": "web"}},
	)
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			useFakeClock(t)
			run := runIn(t, form, cfg, batch, closerSpan(map[string]any{"tier": "web"}))
			wantPoint(t, run.points, "req.count", "service.name=a(Str)", 0, 10, 3)
			wantCounter(t, run.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "unmatched"}, 2)
		})
	}
}

// group_by keys in every form, each keeping the type of its value:
//   - service.name, plain (from the resource);
//   - {key: http.route, default: unmatched}: the route, or "unmatched" for a span without one;
//   - {key: route, ottl: Concat([method, route], " ")}: a string;
//   - {key: code, ottl: status code attribute}: an int;
//   - {key: kib, ottl: Double(body size) / 1024.0}: a double;
//   - {key: scope, ottl: scope.name}: the instrumentation scope's name (SDK or eBPF spans apart);
//   - {key: tenant, ottl: tenant attribute, default: none}: nil without one, then the default;
//   - {key: api, ottl: IsMatch(route, "^/api")}: a bool (false without a route);
//   - {key: labels, ottl: a map attribute}: its JSON form;
//   - {key: parts, ottl: Split(route, "/")}: a slice, as JSON (["","api"]; nil without a route).
//
// Two spans of one service, one scope, identical but for the route: GET /api (with every
// attribute) and one without http.route and tenant. Concat gives "GET <nil>" for the missing route
// (OTTL writes a missing operand as <nil>; default applies only where the expression is nil).
func TestGroupByKeysComputedAndDefaulted(t *testing.T) {
	cfg := ottlConfig(AggregationConfig{Name: "req", Signal: "spans", GroupBy: []GroupByKey{
		{Key: "service.name"},
		{Key: "http.route", Default: "unmatched"},
		{Key: "route", OTTL: `Concat([span.attributes["http.request.method"], span.attributes["http.route"]], " ")`},
		{Key: "code", OTTL: `span.attributes["http.response.status_code"]`},
		{Key: "kib", OTTL: `Double(span.attributes["body.size"]) / 1024.0`},
		{Key: "scope", OTTL: `scope.name`},
		{Key: "tenant", OTTL: `span.attributes["tenant"]`, Default: "none"},
		{Key: "api", OTTL: `IsMatch(span.attributes["http.route"], "^/api")`},
		{Key: "labels", OTTL: `span.attributes["labels"]`},
		{Key: "parts", OTTL: `Split(span.attributes["http.route"], "/")`},
	}})
	attrs := func(route bool) map[string]any {
		a := map[string]any{"http.request.method": "GET", "http.response.status_code": 200, "body.size": 2048,
			"labels": map[string]any{"team": "x"}}
		if route {
			a["http.route"], a["tenant"] = "/api", "t1"
		}
		return a
	}
	batch := traces(
		spanSpec{service: "a", scope: "otelhttp", end: 1, attrs: attrs(true)},
		spanSpec{service: "a", scope: "otelhttp", end: 2, attrs: attrs(false)},
	)
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			useFakeClock(t)
			run := runIn(t, form, cfg, batch, closerSpan(nil))
			wantPoint(t, run.points, "req.count", `api=true(Bool),code=200(Int),http.route=/api(Str),kib=2(Double),labels={"team":"x"}(Str),`+
				`parts=["","api"](Str),route=GET /api(Str),scope=otelhttp(Str),service.name=a(Str),tenant=t1(Str)`, 0, 10, 1)
			wantPoint(t, run.points, "req.count", `api=false(Bool),code=200(Int),http.route=unmatched(Str),kib=2(Double),labels={"team":"x"}(Str),`+
				`route=GET <nil>(Str),scope=otelhttp(Str),service.name=a(Str),tenant=none(Str)`, 0, 10, 1)
		})
	}
}

// value: {ottl}: an int, a double or a numeric string is the value; anything else means no value
// (counted by count only, under values_missing), and an expression that fails is counted as an OTTL
// error besides. Five log records of service a, value Double(size) / 1024.0 and, in a second
// aggregation, the size attribute as it is:
//
//	size      kib: Double(size) / 1024.0                     raw: size
//	2048      2                                              2048
//	"3072"    3                                              3072 (a numeric string)
//	"abc"     no value: Double fails (an OTTL error)         no value: not numeric
//	true      1/1024 (Double(true) is 1)                     no value: not numeric (a bool)
//	(none)    no value: nil / 1024.0 fails (an OTTL error)   no value: missing
//
// values_missing: missing 2 (kib's two errors are values missing), + 1 (raw) = 3; not_numeric 2.
func TestValueExpressions(t *testing.T) {
	cfg := ottlConfig(
		AggregationConfig{Name: "kib", Signal: "logs", Value: ValueConfig{OTTL: `Double(log.attributes["size"]) / 1024.0`},
			Outputs: []string{"count", "sum"}},
		AggregationConfig{Name: "raw", Signal: "logs", Value: ValueConfig{OTTL: `log.attributes["size"]`},
			Outputs: []string{"count", "sum"}},
	)
	batch := logs(
		logSpec{service: "a", ts: 1, attrs: map[string]any{"size": 2048}},
		logSpec{service: "a", ts: 2, attrs: map[string]any{"size": "3072"}},
		logSpec{service: "a", ts: 3, attrs: map[string]any{"size": "abc"}},
		logSpec{service: "a", ts: 4, attrs: map[string]any{"size": true}},
		logSpec{service: "a", ts: 5},
	)
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			useFakeClock(t)
			run := runIn(t, form, cfg, batch, logs(logSpec{service: "closer", ts: 12, attrs: map[string]any{"size": 1}}))
			wantPoint(t, run.points, "kib.count", "", 0, 10, 5)
			wantPoint(t, run.points, "kib.sum", "", 0, 10, 2+3+1.0/1024)
			wantPoint(t, run.points, "raw.count", "", 0, 10, 5)
			wantPoint(t, run.points, "raw.sum", "", 0, 10, 2048+3072)
			wantCounter(t, run.tel, "otelcol_window_aggregator_ottl_errors", map[string]string{"aggregation": "kib", "clause": "value"}, 2)
			wantCounter(t, run.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "missing"}, 3)
			wantCounter(t, run.tel, "otelcol_window_aggregator_values_missing", map[string]string{"reason": "not_numeric"}, 2)
		})
	}
}

// Logs in OTTL: a condition on the severity and the body, a key computed from the body, and a plain
// key with a default. Of four records of service a, the three at WARN or above whose body is not a
// heartbeat are selected: ERROR "disk full" (component disk), WARN "slow" (component absent:
// "core"), WARN "disk slow" (disk); INFO "disk ok" and ERROR "heartbeat" are not.
func TestConditionsAndKeysOnLogs(t *testing.T) {
	cfg := ottlConfig(AggregationConfig{Name: "events", Signal: "logs",
		Where: &WhereConfig{Conditions: []string{`log.severity_number >= SEVERITY_NUMBER_WARN and log.body != "heartbeat"`}},
		GroupBy: []GroupByKey{
			{Key: "component", Default: "core"},
			{Key: "first_word", OTTL: `Split(log.body, " ")[0]`},
		}})
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i, r := range []struct {
		sev       plog.SeverityNumber
		body      string
		component string
	}{{plog.SeverityNumberError, "disk full", "disk"}, {plog.SeverityNumberWarn, "slow", ""}, {plog.SeverityNumberWarn, "disk slow", "disk"},
		{plog.SeverityNumberInfo, "disk ok", "disk"}, {plog.SeverityNumberError, "heartbeat", "disk"}} {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(timestampAt(float64(i + 1)))
		lr.SetSeverityNumber(r.sev)
		lr.Body().SetStr(r.body)
		if r.component != "" {
			lr.Attributes().PutStr("component", r.component)
		}
	}
	for _, form := range forms {
		t.Run(form, func(t *testing.T) {
			useFakeClock(t)
			closer := logs(logSpec{service: "closer", ts: 12})
			closer.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).SetSeverityNumber(plog.SeverityNumberFatal)
			run := runIn(t, form, cfg, ld, closer)
			wantPoint(t, run.points, "events.count", "component=disk(Str),first_word=disk(Str)", 0, 10, 2)
			wantPoint(t, run.points, "events.count", "component=core(Str),first_word=slow(Str)", 0, 10, 1)
			if n := len(find(run.points, "events.count", "component=disk(Str),first_word=heartbeat(Str)")); n != 0 {
				t.Fatal("the heartbeat was selected")
			}
		})
	}
}

// error_mode on a condition that fails at run time: ParseJSON of a body that is not JSON. Three spans:
// {"a":1} (selected), {"a":2} (not), and "oops" (the condition fails).
//   - ignore: the failing span counts as not selected, the error is counted and logged once;
//   - silent: the same, without the log;
//   - propagate: the same count, and every consume call returns the error (the batch's other spans
//     are aggregated all the same).
func TestErrorModes(t *testing.T) {
	batch := traces(
		spanSpec{service: "a", end: 1, attrs: map[string]any{"j": `{"a":1}`}},
		spanSpec{service: "a", end: 2, attrs: map[string]any{"j": `{"a":2}`}},
		spanSpec{service: "a", end: 3, attrs: map[string]any{"j": "oops"}},
	)
	for _, mode := range []string{"ignore", "silent", "propagate"} {
		for _, form := range forms {
			t.Run(mode+"/"+form, func(t *testing.T) {
				useFakeClock(t)
				cfg := ottlConfig(AggregationConfig{Name: "req", Signal: "spans",
					Where: &WhereConfig{Conditions: []string{`ParseJSON(span.attributes["j"])["a"] == 1`}}})
				must(t, cfg.ErrorMode.UnmarshalText([]byte(mode)))
				run := runIn(t, form, cfg, batch, closerSpan(map[string]any{"j": `{"a":1}`}))
				wantPoint(t, run.points, "req.count", "", 0, 10, 1)
				wantCounter(t, run.tel, "otelcol_window_aggregator_ottl_errors", map[string]string{"aggregation": "req", "clause": "where"}, 1)
				logged := run.logs.FilterMessageSnippet("OTTL errors").Len()
				switch mode {
				case "ignore":
					if logged != 1 || len(run.errs) != 0 {
						t.Fatalf("%d logs, errors %v; want one log, no error", logged, run.errs)
					}
				case "silent":
					if logged != 0 || len(run.errs) != 0 {
						t.Fatalf("%d logs, errors %v; want none", logged, run.errs)
					}
				case "propagate":
					if logged != 0 || len(run.errs) != 1 || !strings.Contains(run.errs[0].Error(), `aggregation "req": where`) {
						t.Fatalf("%d logs, errors %v; want the batch refused with the condition's error", logged, run.errs)
					}
				}
			})
		}
	}
}

// The ignore mode logs at a bounded rate: many failures in one minute give one line.
func TestIgnoredErrorsAreLoggedAtABoundedRate(t *testing.T) {
	useFakeClock(t)
	cfg := ottlConfig(AggregationConfig{Name: "req", Signal: "spans",
		Where: &WhereConfig{Conditions: []string{`ParseJSON(span.attributes["j"])["a"] == 1`}}})
	var batches []any
	for i := range 5 {
		batches = append(batches, traces(spanSpec{service: "a", end: float64(i + 1), attrs: map[string]any{"j": "oops"}}))
	}
	run := runIn(t, "connector", cfg, batches...)
	if n := run.logs.FilterMessageSnippet("OTTL errors").Len(); n != 1 {
		t.Fatalf("%d log lines for 5 failures within a minute, want 1", n)
	}
	wantCounter(t, run.tel, "otelcol_window_aggregator_ottl_errors", map[string]string{"aggregation": "req", "clause": "where"}, 5)
}

// timestampAt is a pdata timestamp s seconds after the epoch.
func timestampAt(sec float64) pcommon.Timestamp {
	return pcommon.Timestamp(int64(sec * float64(time.Second)))
}

// countingParser counts the expressions it parses.
type countingParser struct {
	ingest.OTTLParser
	n int
}

func (c *countingParser) Condition(expr string) (ingest.OTTLCondition, error) {
	c.n++
	return c.OTTLParser.Condition(expr)
}

func (c *countingParser) Value(expr string) (ingest.OTTLValue, error) {
	c.n++
	return c.OTTLParser.Value(expr)
}

// The collector validates a configuration, then creates its components from it: each OTTL
// expression is parsed once, by Validate, and the component takes what it parsed.
func TestOTTLIsParsedOnce(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", Outputs: []string{"count", "sum"},
		Where:   &WhereConfig{Conditions: []string{`span.kind == SPAN_KIND_SERVER`}},
		GroupBy: []GroupByKey{{Key: "route", OTTL: `span.attributes["http.route"]`}},
		Value:   ValueConfig{OTTL: `Double(span.attributes["size"])`}}}
	must(t, cfg.Validate())
	op := cfg.ottl.BySignal[ingest.SpanSignal.Name]
	if op == nil || len(op.Conditions) != 1 || len(op.Values) != 2 {
		t.Fatalf("Validate kept %+v, want the condition and the two values", op)
	}
	counting := &countingParser{OTTLParser: op.Parser}
	op.Parser = counting
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 1, ms: 1, kind: ptrace.SpanKindServer, attrs: map[string]any{"http.route": "/r", "size": 3}}))
	if counting.n != 0 {
		t.Fatalf("the component parsed %d expressions again", counting.n)
	}
	h.shutdown()
	ps := points(h.metrics.AllMetrics())
	if got := find(ps, "n.sum", "route=/r(Str)"); len(got) != 1 || got[0].value != 3 {
		t.Fatalf("n.sum{route=/r} = %+v, want one point of 3", got)
	}
}
