package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

const sec = int64(time.Second)

// configFor is the collector config of the end-to-end run: the connector form fed by one OTLP
// receiver, the processor form by another, each exporting to its own test server.
func configFor(recv, recvProc int, out, outProc string) string {
	return fmt.Sprintf(`
receivers:
  otlp:
    protocols: {grpc: {endpoint: 127.0.0.1:%d}}
  otlp/proc:
    protocols: {grpc: {endpoint: 127.0.0.1:%d}}
connectors:
  window_aggregator/c:
    window: {size: 10s}
`+windowByWindow+`
    watermark: {max_future_skew: 1m}
    allowed_lateness: 10s
    aggregations:
      - name: lat
        signal: spans
        group_by: [service.name, span.name]
        outputs: [count, sum, avg, min, max, p99, histogram]
      - name: logbytes
        signal: logs
        group_by: [severity.text]
        value: attribute:size
        outputs: [count, sum]
processors:
  windowaggregator/p:
    window: {size: 10s}
`+windowByWindow+`
    aggregations:
      - name: plat
        signal: spans
        outputs: [count, max]
exporters:%s%s
service:
  telemetry:
    metrics: {level: none}
  pipelines:
    traces/in: {receivers: [otlp], exporters: [window_aggregator/c]}
    logs/in: {receivers: [otlp], exporters: [window_aggregator/c]}
    metrics/out: {receivers: [window_aggregator/c], exporters: [otlp_grpc/out]}
    traces/late: {receivers: [window_aggregator/c], exporters: [otlp_grpc/out]}
    logs/late: {receivers: [window_aggregator/c], exporters: [otlp_grpc/out]}
    traces/proc: {receivers: [otlp/proc], processors: [windowaggregator/p], exporters: [otlp_grpc/proc]}
    metrics/proc: {receivers: [otlp/proc], processors: [windowaggregator/p], exporters: [otlp_grpc/proc]}
`, recv, recvProc, otlpExporter("otlp_grpc/out", out), otlpExporter("otlp_grpc/proc", outProc))
}

type span struct {
	service, name string
	end           int64 // Unix ns; 0: no timestamps
	ms            float64
}

func spans(ss ...span) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	for _, s := range ss {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", s.service)
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName(s.name)
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetTraceID(pcommon.TraceID{1, 2, 3})
		var id pcommon.SpanID // unique: spans alike in name, time and duration are not resends
		binary.BigEndian.PutUint64(id[:], wmSeq.Add(1))
		sp.SetSpanID(id)
		if s.end != 0 {
			sp.SetEndTimestamp(pcommon.Timestamp(s.end))
			sp.SetStartTimestamp(pcommon.Timestamp(s.end - int64(s.ms*1e6)))
		}
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

func logRecords(base int64, recs ...[3]any) plogotlp.ExportRequest {
	ld := plog.NewLogs()
	for _, r := range recs {
		lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(base + r[0].(int64)))
		lr.SetSeverityText(r[1].(string))
		lr.Attributes().PutInt("size", int64(r[2].(int)))
	}
	return plogotlp.NewExportRequestFromLogs(ld)
}

// dp is a received data point, flattened.
type dp struct {
	metric     string
	attrs      string
	start, end int64 // relative to the test's base, in seconds
	value, sum float64
	typ        pmetric.MetricType
}

func (s *otlpServer) points(base int64) []dp {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []dp
	for _, req := range s.metrics {
		md := req.Metrics()
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					add := func(attrs pcommon.Map, start, end pcommon.Timestamp, v, sum float64) {
						out = append(out, dp{metric: m.Name(), attrs: attrString(attrs), typ: m.Type(),
							start: (int64(start) - base) / sec, end: (int64(end) - base) / sec, value: v, sum: sum})
					}
					switch m.Type() {
					case pmetric.MetricTypeSum, pmetric.MetricTypeGauge:
						var dps pmetric.NumberDataPointSlice
						if m.Type() == pmetric.MetricTypeGauge {
							dps = m.Gauge().DataPoints()
						} else {
							dps = m.Sum().DataPoints()
						}
						for d := 0; d < dps.Len(); d++ {
							p := dps.At(d)
							v := p.DoubleValue()
							if p.ValueType() == pmetric.NumberDataPointValueTypeInt {
								v = float64(p.IntValue())
							}
							add(p.Attributes(), p.StartTimestamp(), p.Timestamp(), v, 0)
						}
					case pmetric.MetricTypeExponentialHistogram:
						dps := m.ExponentialHistogram().DataPoints()
						for d := 0; d < dps.Len(); d++ {
							p := dps.At(d)
							add(p.Attributes(), p.StartTimestamp(), p.Timestamp(), float64(p.Count()), p.Sum())
						}
					}
				}
			}
		}
	}
	return out
}

func attrString(m pcommon.Map) string {
	var kv []string
	m.Range(func(k string, v pcommon.Value) bool {
		kv = append(kv, k+"="+v.AsString())
		return true
	})
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// lateSpans returns the late-reason attribute of every routed span, by span name.
func (s *otlpServer) lateSpans() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, req := range s.traces {
		rss := req.Traces().ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sps := rss.At(i).ScopeSpans().At(0).Spans()
			for j := 0; j < sps.Len(); j++ {
				r, _ := sps.At(j).Attributes().Get("window_aggregator.late.reason")
				out[sps.At(j).Name()] = r.Str()
			}
		}
	}
	return out
}

func (s *otlpServer) spanCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, req := range s.traces {
		n += req.Traces().SpanCount()
	}
	return n
}

// wantPoints waits until the points of metric with attrs and window start equal want (in arrival
// order: a first firing, then late firings).
func wantPoints(t *testing.T, srv *otlpServer, base int64, metric, attrs string, start int64, want ...float64) {
	t.Helper()
	var got []float64
	eventually(t, fmt.Sprintf("%s{%s} at %d = %v", metric, attrs, start, want), func() bool {
		got = got[:0]
		for _, p := range srv.points(base) {
			if p.metric == metric && p.attrs == attrs && p.start == start {
				if p.end-p.start != 10 {
					t.Fatalf("%s: window [%d,%d), want 10 s long", metric, p.start, p.end)
				}
				got = append(got, p.value)
			}
		}
		if len(got) != len(want) {
			return false
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 0.01*math.Abs(want[i])+1e-9 {
				return false
			}
		}
		return true
	})
}

func TestDistributionConnectorAndProcessor(t *testing.T) {
	skipShort(t)
	out, outProc := startServer(t), startServer(t)
	recv, recvProc := freePort(t), freePort(t)
	col, c := runCollector(t, recv, configFor(recv, recvProc, out.addr, outProc.addr))
	cp := dial(t, loopback(recvProc))
	ctx := context.Background()
	// Event times are five minutes in the past, on a window boundary: B.
	base, at := pastBase()
	const ax = "service.name=a,span.name=/x"

	// Out of order within a batch and across batches, all on time: W = B+5.
	sendAll(t, c, spans(span{"a", "/x", at(5), 20}, span{"a", "/x", at(1), 10}, span{"a", "/x", at(3), 30}))
	if _, err := c.logs.Export(ctx, logRecords(base, [3]any{1 * sec, "ERROR", 100}, [3]any{2 * sec, "ERROR", 50})); err != nil {
		t.Fatal(err)
	}
	sendAll(t, c, spans(span{"a", "/x", at(4), 40})) // W stays B+5: still on time
	sendAll(t, c, spans(span{"a", "/x", at(12), 1})) // W = B+12: [B, B+10) fires
	// Hand-computed: durations 10, 20, 30, 40 ms.
	wantPoints(t, out, base, "lat.count", ax, 0, 4)
	wantPoints(t, out, base, "lat.sum", ax, 0, 100)
	wantPoints(t, out, base, "lat.avg", ax, 0, 25)
	wantPoints(t, out, base, "lat.min", ax, 0, 10)
	wantPoints(t, out, base, "lat.max", ax, 0, 40)
	wantPoints(t, out, base, "logbytes.count", "severity.text=ERROR", 0, 2)
	wantPoints(t, out, base, "logbytes.sum", "severity.text=ERROR", 0, 150)

	// Within allowed_lateness (W = B+12 < B+10+10): a late firing, deltas and corrected values.
	sendAll(t, c, spans(span{"a", "/x", at(6), 50}))
	wantPoints(t, out, base, "lat.count", ax, 0, 4, 1)
	wantPoints(t, out, base, "lat.sum", ax, 0, 100, 50)
	wantPoints(t, out, base, "lat.avg", ax, 0, 25, 30)
	wantPoints(t, out, base, "lat.max", ax, 0, 40, 50)

	// W = B+21: [B+10, B+20) fires; [B, B+10) expires. Then an expired, an invalid and a future span.
	sendAll(t, c, spans(span{"a", "/x", at(21), 1}))
	wantPoints(t, out, base, "lat.count", ax, 10, 1)
	sendAll(t, c, spans(span{"a", "expired", at(7), 1}, span{"a", "invalid", 0, 0},
		span{"a", "future", time.Now().Add(2 * time.Minute).UnixNano(), 1}))
	eventually(t, "three routed spans", func() bool { return len(out.lateSpans()) == 3 })
	if got := out.lateSpans(); got["expired"] != "expired" || got["invalid"] != "invalid" || got["future"] != "future" {
		t.Fatalf("late spans by reason: %v", got)
	}
	wantPoints(t, out, base, "lat.count", ax, 0, 4, 1) // nothing more for the expired window

	// The processor form: passes spans on, adds the results to its metrics pipeline.
	sendAll(t, cp, spans(span{"p", "/y", at(1), 5}, span{"p", "/y", at(2), 7}), spans(span{"p", "/y", at(11), 1}))
	wantPoints(t, outProc, base, "plat.count", "", 0, 2)
	wantPoints(t, outProc, base, "plat.max", "", 0, 7)
	eventually(t, "the processor passing every span on", func() bool { return outProc.spanCount() == 3 })

	// SIGTERM fires the open window [B+20, B+30) (spans at B+21 and B+25) before the collector exits.
	sendAll(t, c, spans(span{"a", "/x", at(25), 3}))
	col.stop(t)
	wantPoints(t, out, base, "lat.count", ax, 20, 2)
	wantPoints(t, out, base, "lat.max", ax, 20, 3)
	wantPoints(t, outProc, base, "plat.count", "", 10, 1)
	// Nearest rank: the least value with at least 99% of {10, 20, 30, 40} at or below it.
	wantPoints(t, out, base, "lat.p99", ax, 0, 40, 50)
}
