package e2e

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// routeSpans is a request of spans of service a, all server spans ending at end, one per route: its
// http.route ("": none) and http.request.method GET.
func routeSpans(end int64, routes ...string) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "a")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("otelhttp")
	for _, r := range routes {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("request")
		sp.SetKind(ptrace.SpanKindServer)
		n := wmSeq.Add(1) // unique: spans alike are not resends
		sp.SetTraceID(pcommon.TraceID{9, byte(n >> 8), byte(n)})
		sp.SetSpanID(pcommon.SpanID{9, byte(n >> 8), byte(n)})
		sp.SetStartTimestamp(pcommon.Timestamp(end - 1e6))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
		sp.Attributes().PutStr("http.request.method", "GET")
		if r != "" {
			sp.Attributes().PutStr("http.route", r)
		}
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

// The built distribution runs examples/ottl.yaml's span aggregation: health checks are left out, and
// the computed route and scope, and the default of a span without a route, are dimensions of the
// output. An OTTL expression that does not parse stops it at startup, naming the key.
func TestOTTLInTheDistribution(t *testing.T) {
	skipShort(t)
	out := startServer(t)
	recv := freePort(t)
	config := otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 10s}
    aggregations:
      - name: http.server.requests
        signal: spans
        where:
          conditions: ['span.kind == SPAN_KIND_SERVER and span.attributes["http.route"] != "/health"']
        group_by:
          - service.name
          - {key: http.route, default: unmatched}
          - {key: route, ottl: 'Concat([span.attributes["http.request.method"], span.attributes["http.route"]], " ")'}
          - {key: scope, ottl: 'scope.name'}
exporters:%s
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp_grpc/out]}
`, otlpExporter("otlp_grpc/out", out.addr))
	col, c := runCollector(t, recv, config)
	base, at := pastBase()
	sendAll(t, c, routeSpans(at(1), "/api", "/health", "/api", ""), routeSpans(at(2), "/health", "/login"))
	sendAll(t, c, routeSpans(at(12), "/api")) // W = B+12: [B, B+10) fires
	const common = ",scope=otelhttp,service.name=a"
	wantPoints(t, out, base, "http.server.requests.count", "http.route=/api,route=GET /api"+common, 0, 2)
	wantPoints(t, out, base, "http.server.requests.count", "http.route=/login,route=GET /login"+common, 0, 1)
	wantPoints(t, out, base, "http.server.requests.count", "http.route=unmatched,route=GET <nil>"+common, 0, 1)
	for _, p := range out.points(base) {
		if strings.Contains(p.attrs, "/health") {
			t.Errorf("a health check was counted: %+v", p)
		}
	}
	col.stop(t)

	bad := writeConfig(t, "bad-ottl.yaml", debugConfig(0, "{size: 10s}",
		`[{name: a, signal: spans, where: {conditions: ['span.attributes["x"] ==']}}]`, "traces"))
	outText, err := validate(bad)
	if err == nil {
		t.Fatal("a condition that does not parse validated")
	}
	checkOutputContains(t, "output", outText, "aggregations[0] (a).where.conditions[0]", "invalid syntax")
}
