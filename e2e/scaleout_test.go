package e2e

// Scale-out as users deploy it: the gateway distribution (the OTLP receiver and the load-balancing
// exporter) in front of several instances of the window_aggregator distribution, all of them
// processes on loopback ports. What must hold: each series is computed by one instance and carries
// its service.instance.id, and the totals summed over instances are the true ones, the same as one
// instance computes from the same traffic, also after the gateway is restarted with one instance more.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// scaleOutInstance is the config of one window_aggregator instance: count by service and span name
// in 10 s windows, with settings (windowByWindow, or "" for cumulative points), to the test's server
// at out, with its own telemetry on telPort and, when id is not "", service.instance.id set to id
// (else the collector makes one up).
func scaleOutInstance(recv, telPort int, out, id, settings string) string {
	resource := ""
	if id != "" {
		resource = fmt.Sprintf(`
    resource: {service.instance.id: %s}`, id)
	}
	return otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 10s}%s
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name, span.name], outputs: [count]}
exporters:%s
service:%s%s
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp_grpc]}
`, settings, otlpExporter("otlp_grpc", out), telemetryConfig(telPort), resource)
}

// gatewayConfig is the gateway tier: OTLP in, the load-balancing exporter out to backends, routing
// by routing (the exporter's routing_key and, for attributes, its routing_attributes).
func gatewayConfig(recv int, routing string, backends []string) string {
	return otlpReceiver(recv) + fmt.Sprintf(`
exporters:
  load_balancing:
    %s
    protocol:
      otlp:
        tls: {insecure: true}
    resolver:
      static: {hostnames: [%s]}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [load_balancing]}
`, routing, strings.Join(backends, ", "))
}

// scaleOutNode is one running window_aggregator instance.
type scaleOutNode struct {
	col     *collector
	recv    int
	telPort int
}

func startScaleOutNode(t *testing.T, out, id, settings string) *scaleOutNode {
	t.Helper()
	n := &scaleOutNode{recv: freePort(t), telPort: freePort(t)}
	n.col = startCollector(t, scaleOutInstance(n.recv, n.telPort, out, id, settings), loopback(n.recv))
	return n
}

// aggregated is the records the instance has aggregated so far.
func (n *scaleOutNode) aggregated(t *testing.T) float64 {
	v, _ := telemetrySum(scrape(t, n.telPort), "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"})
	return v
}

// scaleOutTraffic makes requests of spans of 20 services with 3 span names each, stamped in the 10 s
// window that starts at windowStart, each request holding every service (which the gateway splits),
// and counts them per service and span name.
func scaleOutTraffic(windowStart int64, requests int, sent map[string]int) []ptraceotlp.ExportRequest {
	var out []ptraceotlp.ExportRequest
	for r := range requests {
		td := ptrace.NewTraces()
		for s := range 20 {
			rs := td.ResourceSpans().AppendEmpty()
			service := fmt.Sprintf("svc-%02d", s)
			rs.Resource().Attributes().PutStr("service.name", service)
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for k := range 3 {
				for range 1 + (s+k+r)%4 {
					sp := spans.AppendEmpty()
					sp.SetName(fmt.Sprintf("op-%d", k))
					n := wmSeq.Add(1)
					sp.SetTraceID(pcommon.TraceID{5, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
					sp.SetSpanID(pcommon.SpanID{5, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
					end := windowStart + int64(r)*int64(time.Second)/int64(requests) + int64(k)*int64(time.Millisecond)
					sp.SetStartTimestamp(pcommon.Timestamp(end - int64(time.Millisecond)))
					sp.SetEndTimestamp(pcommon.Timestamp(end))
					sent[service+"|"+sp.Name()]++
				}
			}
		}
		out = append(out, ptraceotlp.NewExportRequestFromTraces(td))
	}
	return out
}

// countPoint is one lat.count data point as the backend received it.
type countPoint struct {
	instance, series string // service.instance.id; service and span name
	start, end       int64
	value            float64
}

func (s *otlpServer) countPoints() []countPoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []countPoint
	for _, req := range s.metrics {
		rms := req.Metrics().ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			res := rms.At(i).Resource().Attributes()
			instance, _ := res.Get("service.instance.id")
			service, _ := res.Get("service.name")
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if ms.At(k).Name() != "lat.count" {
						continue
					}
					dps := ms.At(k).Sum().DataPoints()
					for l := 0; l < dps.Len(); l++ {
						dp := dps.At(l)
						name, _ := dp.Attributes().Get("span.name")
						out = append(out, countPoint{instance: instance.AsString(), series: service.AsString() + "|" + name.AsString(),
							start: int64(dp.StartTimestamp()), end: int64(dp.Timestamp()), value: float64(dp.IntValue()) + dp.DoubleValue()})
					}
				}
			}
		}
	}
	return out
}

func TestScaleOutBehindTheLoadBalancer(t *testing.T) {
	skipShort(t)
	const service = "routing_key: service"
	for _, tc := range []struct{ name, routing, settings string }{
		{"routing_key=service", service, windowByWindow},
		{"routing_key=attributes", "routing_key: attributes\n    routing_attributes: [service.name, span.name]", windowByWindow},
		{"routing_key=service,cumulative", service, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testScaleOut(t, tc.routing, tc.settings)
		})
	}
}

// testScaleOut runs the tiers with the gateway's routing and the instances' settings. Delta points
// (windowByWindow) are checked window by window; cumulative ones by their last totals.
func testScaleOut(t *testing.T, routing, settings string) {
	base, at := pastBase()
	srv, refSrv := startServer(t), startServer(t)
	a, b := startScaleOutNode(t, srv.addr, "wa-a", settings), startScaleOutNode(t, srv.addr, "wa-b", settings)
	ref := startScaleOutNode(t, refSrv.addr, "wa-ref", settings) // one instance given all the traffic
	refClient := dial(t, loopback(ref.recv))
	sent := map[string]int{}
	total := 0
	// send exports reqs to the gateway and to the reference instance, and waits until the instances
	// behind the gateway, and the reference, have aggregated every record sent so far.
	send := func(gw *client, nodes []*scaleOutNode, reqs []ptraceotlp.ExportRequest) {
		t.Helper()
		for _, req := range reqs {
			total += req.Traces().SpanCount()
			exportTraces(t, gw, req)
			exportTraces(t, refClient, req)
		}
		eventually(t, "every record aggregated behind the gateway and by the reference", func() bool {
			sum := 0.0
			for _, n := range nodes {
				sum += n.aggregated(t)
			}
			return sum == float64(total) && ref.aggregated(t) == float64(total)
		})
	}

	// The first window, through a gateway in front of two instances.
	gwPort := freePort(t)
	gw := startBinary(t, gatewayBinary, gatewayConfig(gwPort, routing, []string{loopback(a.recv), loopback(b.recv)}), loopback(gwPort))
	send(dial(t, loopback(gwPort)), []*scaleOutNode{a, b}, scaleOutTraffic(base, 10, sent))

	// The second window, after the gateway restarts with a third instance, whose service.instance.id
	// the collector makes up.
	gw.stop(t)
	c := startScaleOutNode(t, srv.addr, "", settings)
	gwPort = freePort(t)
	gw = startBinary(t, gatewayBinary, gatewayConfig(gwPort, routing, []string{loopback(a.recv), loopback(b.recv), loopback(c.recv)}), loopback(gwPort))
	send(dial(t, loopback(gwPort)), []*scaleOutNode{a, b, c}, scaleOutTraffic(at(10), 10, sent))
	gw.stop(t)
	// Their shutdown fires the windows still open and delivers them.
	for _, n := range []*scaleOutNode{a, b, c, ref} {
		n.col.stop(t)
	}

	cumulative := settings == ""
	points, refPoints := windowCounts(t, srv.countPoints(), cumulative), windowCounts(t, refSrv.countPoints(), cumulative)
	instances := map[string]bool{}
	writers := map[string]map[string]bool{} // series and window -> instances
	got, want, refTotals := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, p := range points {
		instances[p.instance] = true
		key := fmt.Sprintf("%s@%d", p.series, (p.start-base)/int64(time.Second))
		if writers[key] == nil {
			writers[key] = map[string]bool{}
		}
		writers[key][p.instance] = true
		got[p.series] += p.value
	}
	for _, p := range refPoints {
		refTotals[p.series] += p.value
	}
	for k, n := range sent {
		want[k] = float64(n)
	}
	// Every instance wrote, each under its own service.instance.id, the made-up one too.
	var cID string
	for id := range instances {
		if id != "wa-a" && id != "wa-b" {
			cID = id
		}
	}
	if len(instances) != 3 || !instances["wa-a"] || !instances["wa-b"] || cID == "" {
		t.Errorf("points came from instances %v, want wa-a, wa-b and the third's own id", keysOf(instances))
	}
	// One writer per series and window.
	for key, ws := range writers {
		if len(ws) != 1 {
			t.Errorf("series and window %s written by %v, want one instance", key, keysOf(ws))
		}
	}
	if len(writers) != 2*len(sent) {
		t.Errorf("%d series-windows written, want %d (%d series, 2 windows)", len(writers), 2*len(sent), len(sent))
	}
	// The totals: true, and what one instance computes from the same traffic.
	for series, w := range want {
		if got[series] != w || refTotals[series] != w {
			t.Errorf("%s: summed over instances %v, one instance %v, sent %v", series, got[series], refTotals[series], w)
		}
	}
	if len(got) != len(want) || len(refTotals) != len(want) {
		t.Errorf("%d series behind the gateway, %d on one instance, %d sent", len(got), len(refTotals), len(want))
	}
	// Services that moved when the third instance came.
	moved := 0
	for series := range want {
		w1, w2 := keysOf(writers[series+"@0"]), keysOf(writers[series+"@10"])
		if len(w1) == 1 && len(w2) == 1 && w1[0] != w2[0] {
			moved++
		}
	}
	// Records per instance in each window: both first instances got some, and so did the third.
	first, second := map[string]float64{}, map[string]float64{}
	for _, p := range points {
		if p.start == base {
			first[p.instance] += p.value
		} else {
			second[p.instance] += p.value
		}
	}
	if first["wa-a"] == 0 || first["wa-b"] == 0 {
		t.Errorf("records of the first window per instance %v: the gateway did not spread them", first)
	}
	if second[cID] == 0 {
		t.Errorf("the third instance got no records after the gateway restarted with it: %v", second)
	}
	t.Logf("records %d (%d series); first window per instance: %v; second: %v; series that moved to another instance: %d of %d",
		total, len(sent), first, second, moved, len(sent))
}

// windowCounts turns the count points into what each instance counted per series and window,
// stamped with the window's start: delta points as they are; cumulative ones (whose start is the
// series' start) as the growth of each instance's series from one window end to the next, which
// must never be negative, leaving out windows where it did not grow (a series that moved to another
// instance goes on with its last total on the old one until it expires).
func windowCounts(t *testing.T, points []countPoint, cumulative bool) []countPoint {
	t.Helper()
	if !cumulative {
		return points
	}
	byWriter := map[string][]countPoint{}
	for _, p := range points {
		byWriter[p.instance+" "+p.series] = append(byWriter[p.instance+" "+p.series], p)
	}
	var out []countPoint
	for w, ps := range byWriter {
		slices.SortFunc(ps, func(a, b countPoint) int { return int(a.end - b.end) })
		last := 0.0
		for _, p := range ps {
			if p.value < last {
				t.Errorf("%s: the total went back from %v to %v at %d", w, last, p.value, p.end)
			}
			if p.value > last {
				out = append(out, countPoint{instance: p.instance, series: p.series, start: p.end - 10*sec, end: p.end, value: p.value - last})
			}
			last = max(last, p.value)
		}
	}
	return out
}

func keysOf[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
