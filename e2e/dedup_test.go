package e2e

// The retry storm, as a new user meets it: an upstream collector sends spans over OTLP with
// retry_on_failure and a short timeout to an instance whose traces pipeline fans out to
// window_aggregator and to an exporter whose backend is, for a while, slower than the upstream's
// timeout. The upstream resends every batch that timed out, and the instance's fan-out hands each
// copy to window_aggregator again. With dedup (the default) the totals in Prometheus are the spans
// sent, once; with dedup.enabled false they are more, so the test can fail.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// slowTraces is an OTLP traces backend that, while stalling, holds each request for hold before it
// answers (or until its caller gives up), and counts the spans it is sent.
type slowTraces struct {
	ptraceotlp.UnimplementedGRPCServer
	addr     string
	hold     time.Duration
	stalling atomic.Bool
	spans    atomic.Int64
}

func startSlowTraces(t *testing.T, hold time.Duration) *slowTraces {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowTraces{addr: lis.Addr().String(), hold: hold}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s
}

func (s *slowTraces) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.spans.Add(int64(req.Traces().SpanCount()))
	if s.stalling.Load() {
		select {
		case <-time.After(s.hold):
		case <-ctx.Done():
		}
	}
	return ptraceotlp.NewExportResponse(), nil
}

// upstreamConfig is the upstream tier: OTLP in, and out to the instance at to with a timeout of
// 500 ms and retry_on_failure, no queue, so that a test's export returns once the instance took its
// batch, after as many tries as it took.
func upstreamConfig(recv int, to string) string {
	return otlpReceiver(recv) + fmt.Sprintf(`
exporters:
  otlp_grpc/instance:
    endpoint: %s
    tls: {insecure: true}
    timeout: 500ms
    sending_queue: {enabled: false}
    retry_on_failure: {enabled: true, initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 2m}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp_grpc/instance]}
`, to)
}

// stormInstanceConfig is the instance: its traces pipeline fans out to window_aggregator (count
// and sum of durations by service in 2 s windows, 60 s of lateness, dedup as dedup says) and to
// an OTLP exporter to slow, which waits for it; the results go to the prometheus exporter on
// promPort; its own telemetry on telPort.
func stormInstanceConfig(recv, promPort, telPort int, slow, dedup string) string {
	return otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 2s}
    watermark: {max_out_of_orderness: 1s}
    allowed_lateness: 60s
    dedup: %s
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name], outputs: [count, sum]}
exporters:
  otlp_grpc/slow:
    endpoint: %s
    tls: {insecure: true}
    timeout: 10s
    sending_queue: {enabled: false}
    retry_on_failure: {enabled: false}
  prometheus:
    endpoint: 127.0.0.1:%d
service:%s
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator, otlp_grpc/slow]}
    metrics: {receivers: [window_aggregator], exporters: [prometheus]}
`, dedup, slow, promPort, telemetryConfig(telPort))
}

// stormRun is one retry storm: what was sent, and what the instance, its slow backend and the
// upstream made of it.
type stormRun struct {
	sent        *sentTotals
	spans       int
	slowSpans   int64 // spans the slow backend was sent: every copy the instance took
	retries     int   // the upstream's log lines that say it will retry
	aggregated  float64
	duplicates  float64
	promSamples []promResult
}

// runStorm sends 20 batches of 5 spans (services a and b), one after the other, through upstream and
// instance, the backend stalling (holding each request 1.5 s, three times the upstream's timeout) for
// the first 4 s, so that every batch sent meanwhile is resent until the stall ends; then a flush span
// that takes W past their windows; and reads what Prometheus holds.
func runStorm(t *testing.T, dedup string) stormRun {
	t.Helper()
	slow := startSlowTraces(t, 1500*time.Millisecond)
	instRecv, promPort, telPort, upRecv := freePort(t), freePort(t), freePort(t), freePort(t)
	prom := startPrometheus(t, []string{loopback(promPort)})
	inst := startCollector(t, stormInstanceConfig(instRecv, promPort, telPort, slow.addr, dedup), loopback(instRecv))
	up := startCollector(t, upstreamConfig(upRecv, loopback(instRecv)), loopback(upRecv))
	c := dial(t, loopback(upRecv))
	prom.waitQuery(t, 30*time.Second, `up{job="windowaggregator"} == 1`, nonEmpty)

	base := (time.Now().UnixNano()/(2*sec))*(2*sec) - 60*sec
	run := stormRun{sent: newSentTotals()}
	slow.stalling.Store(true)
	time.AfterFunc(4*time.Second, func() { slow.stalling.Store(false) })
	for i := range 20 {
		var ss []span
		for j := range 5 {
			svc := []string{"a", "b"}[(i+j)%2]
			ss = append(ss, span{svc, "/x", base + int64(i)*sec/2 + int64(j)*sec/10, float64(1 + i*5 + j)})
		}
		run.sent.add(ss...)
		run.spans += len(ss)
		sendAll(t, c, spans(ss...)) // returns once the instance took the batch, after the upstream's retries
	}
	sendAll(t, c, spans(span{"flush", "/x", base + 40*sec, 1})) // W = base + 39 s: [base, base+10) fired
	// The windows' points reach Prometheus by scrape: wait until both series hold still for 3 s
	// (their last windows fired, and scraped).
	run.promSamples = stableQuery(t, prom, `lat_count_total{service_name!="flush"}`, 2, 3*time.Second)
	run.slowSpans = slow.spans.Load()
	run.retries = strings.Count(up.output.String(), "Will retry")
	samples := scrape(t, telPort)
	run.aggregated, _ = telemetrySum(samples, "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"})
	run.duplicates, _ = telemetrySum(samples, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "spans"})
	up.stop(t)
	inst.stop(t)
	return run
}

// stableQuery polls q until it returns n series whose values have not changed for hold, at most 45 s.
func stableQuery(t *testing.T, prom *promServer, q string, n int, hold time.Duration) []promResult {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var last string
	var since time.Time
	for {
		got, err := prom.query(q)
		if err == nil && len(got) == n {
			values := map[string]float64{}
			for _, r := range got {
				values[byService(r)] = r.value
			}
			now := fmt.Sprint(values)
			if now != last {
				last, since = now, time.Now()
			} else if time.Since(since) >= hold {
				return got
			}
		}
		if time.Now().After(deadline) {
			all, _ := prom.query(`{__name__=~"lat.*"}`)
			t.Fatalf("%s did not settle on %d series within 45 s: %v %s\nall: %s", q, n, err, last, formatResults(all))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestRetryStormCountsEachSpanOnce runs the storm with dedup and without.
func TestRetryStormCountsEachSpanOnce(t *testing.T) {
	skipShort(t)
	t.Run("dedup", func(t *testing.T) {
		r := runStorm(t, "{enabled: true}")
		if r.retries == 0 || r.slowSpans <= int64(r.spans)+1 {
			t.Fatalf("no storm: the upstream logged %d retries, the instance took %d spans of %d sent", r.retries, r.slowSpans, r.spans+1)
		}
		if err := equalBy(byService, map[string]float64{"a": r.sent.count["a"], "b": r.sent.count["b"]})(r.promSamples); err != nil {
			t.Errorf("Prometheus: %v", err)
		}
		// Every copy the instance took beyond the first of each span is a duplicate.
		if want := float64(r.slowSpans) - float64(r.spans) - 1; r.duplicates != want || r.aggregated != float64(r.spans)+1 {
			t.Errorf("duplicate_records %v, records{aggregated} %v; want %v and %v", r.duplicates, r.aggregated, want, r.spans+1)
		}
		t.Logf("dedup: %d spans sent, %d taken by the instance (%d upstream retries logged), %v duplicates; Prometheus %s",
			r.spans, r.slowSpans-1, r.retries, r.duplicates, formatResults(r.promSamples))
	})
	t.Run("no_dedup", func(t *testing.T) {
		r := runStorm(t, "{enabled: false}")
		if r.retries == 0 {
			t.Fatalf("no storm: the upstream logged no retry")
		}
		var got float64
		for _, s := range r.promSamples {
			got += s.value
		}
		if got <= float64(r.spans) {
			t.Errorf("without dedup Prometheus holds %v spans of %d sent: the storm should have inflated it", got, r.spans)
		}
		t.Logf("without dedup: %d spans sent, %d taken by the instance (%d upstream retries logged); Prometheus holds %v: %s",
			r.spans, r.slowSpans-1, r.retries, got, formatResults(r.promSamples))
	})
}

// gatewayDedupInstance is an instance behind the gateway: count by service and span name in 10 s
// windows, delta points window by window, 5 minutes of lateness, dedup on (the default), its state
// in file_storage at dir, to the test's server at out, with its own telemetry on telPort and
// service.instance.id id.
func gatewayDedupInstance(recv, telPort int, out, id, dir string) string {
	return otlpReceiver(recv) + fileStorageExtension(dir) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 10s}%s
    allowed_lateness: 5m
    storage: file_storage/wa
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name, span.name], outputs: [count]}
exporters:%s
service:
  extensions: [file_storage/wa]%s
    resource: {service.instance.id: %s}
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp_grpc]}
`, windowByWindow, otlpExporter("otlp_grpc", out), telemetryConfig(telPort), id)
}

// retryingGatewayConfig is the gateway tier routing by service to backends, each sent with a
// timeout of 500 ms, retry_on_failure and the default in-memory sending queue, as a gateway runs in
// production.
func retryingGatewayConfig(recv int, backends []string) string {
	return otlpReceiver(recv) + fmt.Sprintf(`
exporters:
  load_balancing:
    routing_key: service
    protocol:
      otlp:
        tls: {insecure: true}
        timeout: 500ms
        retry_on_failure: {enabled: true, initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 2m}
    resolver:
      static: {hostnames: [%s]}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [load_balancing]}
`, strings.Join(backends, ", "))
}

// Behind the load-balancing gateway (v0.161.0), one instance is stopped (SIGTERM, its state and
// remembered identities checkpointed) halfway through the traffic and started again on the same
// storage while the gateway's queue retries what it could not deliver. What is measured: the totals
// summed over the instances against what was sent, the duplicates each instance recognised, and
// the retries the gateway logged. What must hold: every span counted once.
func TestGatewayRestartOnStorageWithDedup(t *testing.T) {
	skipShort(t)
	base, at := pastBase()
	srv := startServer(t)
	type node struct {
		col           *collector
		recv, telPort int
		dir, id       string
	}
	start := func(n *node) {
		n.col = startCollector(t, gatewayDedupInstance(n.recv, n.telPort, srv.addr, n.id, n.dir), loopback(n.recv))
	}
	nodes := []*node{{id: "wa-a"}, {id: "wa-b"}}
	for _, n := range nodes {
		n.recv, n.telPort, n.dir = freePort(t), freePort(t), t.TempDir()
		start(n)
	}
	gwPort := freePort(t)
	gw := startBinary(t, gatewayBinary, retryingGatewayConfig(gwPort, []string{loopback(nodes[0].recv), loopback(nodes[1].recv)}), loopback(gwPort))
	c := dial(t, loopback(gwPort))

	sent := map[string]int{}
	reqs := scaleOutTraffic(base, 40, sent)
	total := 0
	for i, req := range reqs {
		if i == len(reqs)/2 { // wa-b stops, and 10 requests later starts again, while the gateway keeps sending
			nodes[1].col.stop(t)
		}
		if i == len(reqs)/2+10 {
			start(nodes[1])
		}
		total += req.Traces().SpanCount()
		exportTraces(t, c, req)
		time.Sleep(50 * time.Millisecond)
	}
	aggregated := func() (sum, dups float64) {
		for _, n := range nodes {
			samples := scrape(t, n.telPort)
			v, _ := telemetrySum(samples, "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"})
			d, _ := telemetrySum(samples, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "spans"})
			sum, dups = sum+v, dups+d
		}
		return sum, dups
	}
	// Until the gateway's queue is empty: nothing more arrives for 3 s.
	var last float64
	since := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for time.Since(since) < 3*time.Second && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		if now, _ := aggregated(); now != last {
			last, since = now, time.Now()
		}
	}
	// A span far ahead on each instance takes W past the window; then their windows fire.
	for _, n := range nodes {
		exportTraces(t, dial(t, loopback(n.recv)), spans(span{flushService, "/x", at(25), 1}))
	}
	retries := strings.Count(gw.output.String(), "retry")
	gw.stop(t)
	// The restarted instance counted afresh since its restart: its telemetry is of its second run.
	afterRestart, dups := aggregated()
	for _, n := range nodes {
		n.col.stop(t)
	}
	got := map[string]float64{}
	for _, p := range srv.countPoints() {
		if !strings.HasPrefix(p.series, flushService) {
			got[p.series] += p.value
		}
	}
	var gotTotal float64
	over, under := 0, 0
	for series, n := range sent {
		gotTotal += got[series]
		switch {
		case got[series] > float64(n):
			over++
		case got[series] < float64(n):
			under++
		}
	}
	t.Logf("sent %d spans in %d series; counted %v summed over instances (%d series over, %d under); duplicates recognised %v (by the running instances since their last start); records aggregated since then %v; gateway log lines about retries %d",
		total, len(sent), gotTotal, over, under, dups, afterRestart, retries)
	if gotTotal != float64(total) || over+under != 0 {
		t.Errorf("behind the gateway with a restart on storage, %v spans counted of %d sent (%d series over, %d under)", gotTotal, total, over, under)
	}
}
