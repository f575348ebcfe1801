package e2e

// Exemplars from the built distribution: over OTLP on the histogram points and the max gauge, and
// into a real Prometheus 2.42 (exemplar storage on) by its scrape of the prometheus exporter
// (OpenMetrics) and by remote write, read back with the exemplar query API.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// tracedSpan is a span of service a with its own trace and span ids.
type tracedSpan struct {
	end   int64 // Unix ns
	ms    float64
	trace pcommon.TraceID
	span  pcommon.SpanID
}

func tracedSpans(ss ...tracedSpan) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "a")
	out := rs.ScopeSpans().AppendEmpty().Spans()
	for _, s := range ss {
		sp := out.AppendEmpty()
		sp.SetName("/x")
		sp.SetTraceID(s.trace)
		sp.SetSpanID(s.span)
		sp.SetEndTimestamp(pcommon.Timestamp(s.end))
		sp.SetStartTimestamp(pcommon.Timestamp(s.end - int64(s.ms*1e6)))
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

// promExemplar is one exemplar that the exemplar query API returned, with the le of its series.
type promExemplar struct {
	le, traceID, spanID string
	value               float64
	ts                  float64 // Unix seconds
}

// queryExemplars runs q through /api/v1/query_exemplars over [start, end] (Unix seconds).
func (p *promServer) queryExemplars(q string, start, end float64) ([]promExemplar, error) {
	args := url.Values{"query": {q}, "start": {strconv.FormatFloat(start, 'f', 3, 64)}, "end": {strconv.FormatFloat(end, 'f', 3, 64)}}
	status, body, err := p.get("/api/v1/query_exemplars", args)
	if err != nil {
		return nil, err
	}
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []struct {
				Labels    map[string]string `json:"labels"`
				Value     string            `json:"value"`
				Timestamp float64           `json:"timestamp"`
			} `json:"exemplars"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Status != "success" {
		return nil, fmt.Errorf("query_exemplars %s: HTTP %d, %v %s: %s", q, status, err, answer.Error, body)
	}
	var out []promExemplar
	for _, series := range answer.Data {
		for _, ex := range series.Exemplars {
			v, err := strconv.ParseFloat(ex.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("query_exemplars %s: value %q: %v", q, ex.Value, err)
			}
			out = append(out, promExemplar{le: series.SeriesLabels["le"], traceID: ex.Labels["trace_id"], spanID: ex.Labels["span_id"],
				value: v, ts: ex.Timestamp})
		}
	}
	return out, nil
}

// otlpExemplars returns the exemplars of the data points of metric at timestamp ts (Unix ns) that the
// server received, one list per data point.
func (s *otlpServer) otlpExemplars(metric string, ts int64) [][]pmetric.Exemplar {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]pmetric.Exemplar
	collect := func(at pcommon.Timestamp, exs pmetric.ExemplarSlice) {
		if int64(at) != ts {
			return
		}
		var got []pmetric.Exemplar
		for i := 0; i < exs.Len(); i++ {
			got = append(got, exs.At(i))
		}
		out = append(out, got)
	}
	for _, req := range s.metrics {
		rms := req.Metrics().ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				for k := 0; k < sms.At(j).Metrics().Len(); k++ {
					m := sms.At(j).Metrics().At(k)
					if m.Name() != metric {
						continue
					}
					switch m.Type() {
					case pmetric.MetricTypeHistogram:
						for d := 0; d < m.Histogram().DataPoints().Len(); d++ {
							dp := m.Histogram().DataPoints().At(d)
							collect(dp.Timestamp(), dp.Exemplars())
						}
					case pmetric.MetricTypeGauge:
						for d := 0; d < m.Gauge().DataPoints().Len(); d++ {
							dp := m.Gauge().DataPoints().At(d)
							collect(dp.Timestamp(), dp.Exemplars())
						}
					}
				}
			}
		}
	}
	return out
}

// checkOTLPExemplars checks the one data point of metric at ts: n exemplars, each a span of among (by
// span id) with its duration and end time, the slowest of them included.
func checkOTLPExemplars(t *testing.T, what string, dps [][]pmetric.Exemplar, n int, among []tracedSpan, slowest tracedSpan) {
	t.Helper()
	if len(dps) != 1 {
		t.Fatalf("%s: %d data points, want 1", what, len(dps))
	}
	found := false
	for _, ex := range dps[0] {
		i := slices.IndexFunc(among, func(s tracedSpan) bool { return s.span == ex.SpanID() })
		if i < 0 {
			t.Errorf("%s: exemplar of span %s, not one counted in the point", what, ex.SpanID())
			continue
		}
		if s := among[i]; ex.TraceID() != s.trace || ex.DoubleValue() != s.ms || int64(ex.Timestamp()) != s.end {
			t.Errorf("%s: exemplar %s/%s %v ms at %d, the span is %s %v ms at %d", what, ex.TraceID(), ex.SpanID(),
				ex.DoubleValue(), ex.Timestamp(), s.trace, s.ms, s.end)
		}
		found = found || ex.SpanID() == slowest.span
	}
	if len(dps[0]) != n || !found {
		t.Errorf("%s: %d exemplars, slowest span included: %v; want %d with it", what, len(dps[0]), found, n)
	}
}

// The slowest span of each window reaches Prometheus as an exemplar of its histogram's bucket, by
// scrape and by remote write, and every exemplar of the OTLP points is a span of that point.
func TestExemplarsReachOTLPAndPrometheus(t *testing.T) {
	skipShort(t)
	recv, exporterPort := freePort(t), freePort(t)
	prom := startPrometheus(t, []string{loopback(exporterPort)}, "--enable-feature=exemplar-storage")
	out := startServer(t)
	config := otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 2s}
    watermark: {max_out_of_orderness: 1s}
    aggregations:
      - name: lat
        signal: spans
        group_by: [service.name]
        outputs: [count, max, histogram]
        histogram: {explicit: {buckets: [10ms, 50ms, 100ms, 500ms]}}
        exemplars: {enabled: true, max_per_data_point: 3}
exporters:%s%s
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp, prometheus, prometheus_remote_write]}
`, otlpExporter("otlp", out.addr), prometheusExporters(exporterPort, prom.remoteWriteURL(), "enable_open_metrics: true"))
	_, c := runCollector(t, recv, config)
	const timeout = 30 * time.Second
	prom.waitQuery(t, timeout, `up{job="windowaggregator"} == 1`, nonEmpty)

	// Windows w0 = [B, B+2) and w1 = [B+2, B+4), five minutes in the past; W = greatest event time - 1 s.
	base, at := pastBase()
	rng := rand.New(rand.NewPCG(21, 12))
	traced := func(s, ms float64) tracedSpan {
		ts := tracedSpan{end: at(s), ms: ms}
		for i := range ts.trace {
			ts.trace[i] = byte(rng.Uint32())
		}
		for i := range ts.span {
			ts.span[i] = byte(rng.Uint32())
		}
		return ts
	}
	// Each window's slowest is alone in the (100, 500] bucket, so that its bucket series carries it.
	w0 := []tracedSpan{traced(0.1, 5), traced(0.3, 20), traced(0.5, 420), traced(0.7, 60), traced(0.9, 80), traced(1.1, 35), traced(1.3, 95)}
	w1 := []tracedSpan{traced(2.2, 30), traced(2.4, 8), traced(2.8, 310), traced(3.0, 70), traced(3.2, 15)}
	flush := traced(5.5, 1) // W = B+4.5: w1 fires; flush's window stays open

	windows := []struct {
		spans   []tracedSpan
		slowest tracedSpan
		end     float64
		send    []ptraceotlp.ExportRequest // what fires the window, its own spans included
	}{
		// w1[0] at B+2.2 moves W to B+1.2: w0 stays open; the rest of w1 moves it to B+2.2.
		{w0, w0[2], 2, []ptraceotlp.ExportRequest{tracedSpans(w0...), tracedSpans(w1[0]), tracedSpans(w1[1:]...)}},
		{w1, w1[2], 4, []ptraceotlp.ExportRequest{tracedSpans(flush)}},
	}
	for _, w := range windows {
		sendAll(t, c, w.send...)
		end := at(w.end)
		eventually(t, fmt.Sprintf("a's points at B+%v over OTLP", w.end), func() bool {
			return len(out.otlpExemplars("lat.histogram", end)) > 0 && len(out.otlpExemplars("lat.max", end)) > 0
		})
		checkOTLPExemplars(t, fmt.Sprintf("histogram at B+%v", w.end), out.otlpExemplars("lat.histogram", end), 3, w.spans, w.slowest)
		checkOTLPExemplars(t, fmt.Sprintf("max at B+%v", w.end), out.otlpExemplars("lat.max", end), 1, w.spans, w.slowest)

		// Prometheus holds the slowest span as an exemplar of a's le=500 bucket series, by each path.
		for _, path := range []string{"scrape", "remote_write"} {
			q := fmt.Sprintf(`lat_histogram_milliseconds_bucket{service_name="a", path=%q}`, path)
			want := hex.EncodeToString(w.slowest.trace[:])
			deadline := time.Now().Add(timeout)
			for {
				got, err := prom.queryExemplars(q, float64(base)/1e9-60, float64(time.Now().Unix())+60)
				i := slices.IndexFunc(got, func(e promExemplar) bool { return e.traceID == want })
				if err == nil && i >= 0 {
					ex := got[i]
					t.Logf("%s: %d exemplars on a's buckets; the slowest span of the window ending at B+%v: %+v", path, len(got), w.end, ex)
					le, _ := strconv.ParseFloat(ex.le, 64)
					if ex.spanID != hex.EncodeToString(w.slowest.span[:]) || ex.value != w.slowest.ms || le != 500 ||
						ex.ts < float64(w.slowest.end)/1e9-1e-3 || ex.ts > float64(w.slowest.end)/1e9+1e-3 {
						t.Errorf("%s: exemplar of the slowest span of w(B+%v) is %+v; want span %x, %v ms at %.3f, on le=500",
							path, w.end, ex, w.slowest.span, w.slowest.ms, float64(w.slowest.end)/1e9)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: after %s, no exemplar with trace_id %s (the slowest span of the window ending at B+%v): %v %+v",
						path, timeout, want, w.end, err, got)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	// w1's points carry spans of w1 alone: cumulative exemplars are those since the previous point.
	for _, dp := range out.otlpExemplars("lat.histogram", at(4)) {
		for _, ex := range dp {
			if slices.ContainsFunc(w0, func(s tracedSpan) bool { return s.span == ex.SpanID() }) {
				t.Errorf("the point at B+4 carries span %s of w0", ex.SpanID())
			}
		}
	}
}
