package e2e

// The stalled backend, as an operator meets it: the distribution's OTLP exporter with its default
// retry on and no sending queue, a backend that answers Unavailable for a while, and live traffic the
// whole time. What must hold: the senders' exports keep succeeding promptly, the collector's memory
// stays within the README's formula, every result point is delivered or counted as dropped, and after
// recovery no request is over the gRPC limit of 4 MiB.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// stallBackend is an OTLP metrics backend that can be switched to answer Unavailable. It takes
// requests of any size, so that one over the gRPC default limit is seen rather than refused.
type stallBackend struct {
	pmetricotlp.UnimplementedGRPCServer
	addr string
	down atomic.Bool

	mu       sync.Mutex
	requests []stallRequest
	counts   map[string]float64 // delivered count points: series and window start -> value
	points   int
	refused  int
}

// stallRequest is what the backend noted of one request it accepted.
type stallRequest struct {
	bytes, points int
}

func startStallBackend(t *testing.T) *stallBackend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &stallBackend{addr: lis.Addr().String(), counts: map[string]float64{}}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(256 << 20))
	pmetricotlp.RegisterGRPCServer(srv, b)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return b
}

func (b *stallBackend) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	if b.down.Load() {
		b.mu.Lock()
		b.refused++
		b.mu.Unlock()
		return pmetricotlp.NewExportResponse(), status.Error(codes.Unavailable, "backend down")
	}
	raw, err := req.MarshalProto()
	if err != nil {
		return pmetricotlp.NewExportResponse(), err
	}
	md := req.Metrics()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests = append(b.requests, stallRequest{bytes: len(raw), points: md.DataPointCount()})
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		service, _ := rms.At(i).Resource().Attributes().Get("service.name")
		if service.Str() == flushService {
			continue
		}
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeSum:
					b.points += m.Sum().DataPoints().Len()
				case pmetric.MetricTypeGauge:
					b.points += m.Gauge().DataPoints().Len()
				}
				if m.Name() == "lat.count" {
					dps := m.Sum().DataPoints()
					for l := 0; l < dps.Len(); l++ {
						dp := dps.At(l)
						name, _ := dp.Attributes().Get("span.name")
						b.counts[stallKey(service.Str(), name.Str(), int64(dp.StartTimestamp()))] += dp.DoubleValue() + float64(dp.IntValue())
					}
				}
			}
		}
	}
	return pmetricotlp.NewExportResponse(), nil
}

// flushService names the span that, sent after the traffic, moves W past its last window.
const flushService = "flush"

func stallKey(service, name string, windowStart int64) string {
	return fmt.Sprintf("%s|%s|%d", service, name, windowStart)
}

// stallConfig: one aggregation of count, sum and max by service and span name in 1 s windows, delta
// points, and an OTLP exporter with the exporter's defaults but for the sending queue (off); the
// health_check v2 extension serves the components' status on healthPort.
func stallConfig(recv, telPort, healthPort int, backend string, maxPending int) string {
	return otlpReceiver(recv) + fmt.Sprintf(`
extensions:
  healthcheckv2:
    use_v2: true
    component_health: {include_recoverable_errors: true, recovery_duration: 5s}
    http: {endpoint: 127.0.0.1:%d, status: {enabled: true, path: /status}}
connectors:
  window_aggregator:
    window: {size: 1s}
    temporality: delta
    watermark: {max_out_of_orderness: 500ms, max_future_skew: 1s}
    emit: {max_pending_points: %d}
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name, span.name], outputs: [count, sum, max]}
exporters:
  otlp_grpc:
    endpoint: %s
    tls: {insecure: true}
    sending_queue: {enabled: false}
service:%s
  extensions: [healthcheckv2]
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp_grpc]}
`, healthPort, maxPending, backend, telemetryConfig(telPort))
}

// aggregatorStatuses returns the status that the health_check v2 extension on port shows for each
// window_aggregator instance ("pipeline:traces/connector:window_aggregator", ...).
func aggregatorStatuses(t *testing.T, port int) map[string]string {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/status?verbose", port))
	if err != nil {
		t.Logf("health check: %v", err)
		return nil
	}
	defer resp.Body.Close()
	type node struct {
		Status     string           `json:"status"`
		Components map[string]*node `json:"components"`
	}
	var root node
	if err := json.NewDecoder(resp.Body).Decode(&root); err != nil {
		t.Fatalf("health check: %v", err)
	}
	found := map[string]string{}
	for pipeline, p := range root.Components {
		for name, c := range p.Components {
			if strings.Contains(name, "window_aggregator") {
				found[pipeline+"/"+name] = c.Status
			}
		}
	}
	return found
}

// allStatus reports whether every status in statuses, and at least one, is want.
func allStatus(statuses map[string]string, want string) bool {
	for _, st := range statuses {
		if st != want {
			return false
		}
	}
	return len(statuses) > 0
}

// rss is the resident set size of process pid, in bytes, or 0 if it cannot be read.
func rss(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// spanFeed sends, every 100 ms, one span of a tenth of the series stamped now, so that every series
// has a span in every 1 s window, and notes what it sent and how long each export took.
type spanFeed struct {
	services, names int

	mu      sync.Mutex
	sent    map[string]float64 // series and window start -> spans
	latency []time.Duration
	failed  []error
}

func (f *spanFeed) run(c *client, stop <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		td := ptrace.NewTraces()
		for s := range f.services {
			rs := td.ResourceSpans().AppendEmpty()
			service := fmt.Sprintf("svc-%03d", s)
			rs.Resource().Attributes().PutStr("service.name", service)
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for k := range f.names {
				if (s*f.names+k)%10 != n%10 {
					continue
				}
				sp := spans.AppendEmpty()
				sp.SetName(fmt.Sprintf("op-%d", k))
				sp.SetStartTimestamp(pcommon.Timestamp(now - int64(time.Millisecond)))
				sp.SetEndTimestamp(pcommon.Timestamp(now))
				f.mu.Lock()
				f.sent[stallKey(service, sp.Name(), now-now%int64(time.Second))]++
				f.mu.Unlock()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		began := time.Now()
		_, err := c.traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		cancel()
		f.mu.Lock()
		f.latency = append(f.latency, time.Since(began))
		if err != nil {
			f.failed = append(f.failed, err)
		}
		f.mu.Unlock()
	}
}

func TestStalledBackendNeitherBlocksNorGrows(t *testing.T) {
	skipShort(t)
	const (
		services, names = 250, 20 // 5,000 series
		outputs         = 3
		maxPending      = 20000
		outage          = 20 * time.Second
		// Bytes per data point kept while the consumer fails: pdata of a sum point with a few
		// attributes (bench/README.md, "Memory and checkpoints").
		pointBytes = 345
	)
	backend := startStallBackend(t)
	recv, telPort, healthPort := freePort(t), freePort(t), freePort(t)
	col, c := runCollector(t, recv, stallConfig(recv, telPort, healthPort, backend.addr, maxPending))
	pid := col.cmd.Process.Pid
	idle := rss(pid)
	if idle == 0 {
		t.Fatal("cannot read the collector's VmRSS from /proc")
	}

	feed := &spanFeed{services: services, names: names, sent: map[string]float64{}}
	stop, fed := make(chan struct{}), make(chan struct{})
	go func() { defer close(fed); feed.run(c, stop) }()

	// Memory is sampled every 200 ms throughout: its peak before the outage, and from its start on.
	var phase atomic.Int32 // 0 before the outage, 1 from its start
	var peaks [2]atomic.Int64
	sampling, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sampling:
				return
			case <-tick.C:
			}
			peak := &peaks[phase.Load()]
			if r := rss(pid); r > peak.Load() {
				peak.Store(r)
			}
		}
	}()

	time.Sleep(8 * time.Second) // steady state with the backend up
	// OK unless results dropped already: on a loaded machine the backend may fall behind before the
	// outage, and the status says so then.
	if st := aggregatorStatuses(t, healthPort); !allStatus(st, "StatusOK") {
		if dropped, _ := telemetrySum(scrape(t, telPort), "otelcol_window_aggregator_dropped_points", nil); dropped == 0 {
			t.Errorf("health check before the outage, nothing dropped: %v, want every window_aggregator instance StatusOK", st)
		}
	}
	backend.down.Store(true)
	phase.Store(1)
	outageEnds := time.Now().Add(outage)
	// Once results drop for want of room, the component reports a recoverable error.
	var during map[string]string
	unhealthy := within(outage, func() bool {
		during = aggregatorStatuses(t, healthPort)
		return allStatus(during, "StatusRecoverableError")
	})
	time.Sleep(time.Until(outageEnds))
	backend.down.Store(false)
	recovered := time.Now()
	backend.mu.Lock()
	requestsBefore := len(backend.requests)
	backend.mu.Unlock()
	// The exporter retries the request it holds at its next backoff step (up to 30 s away); the
	// backlog follows it.
	recovering := within(60*time.Second, func() bool {
		n, _ := telemetrySum(scrape(t, telPort), "otelcol_window_aggregator_pending_points", nil)
		backend.mu.Lock()
		after := len(backend.requests) > requestsBefore
		backend.mu.Unlock()
		return n < outputs*services*names && after && time.Since(recovered) > 2*time.Second
	})
	if !recovering {
		t.Fatal("timed out after 60 s waiting for the backlog to be delivered after recovery")
	}
	if !unhealthy {
		t.Errorf("health check during the outage: %v, want every window_aggregator instance StatusRecoverableError", during)
	}
	time.Sleep(3 * time.Second) // traffic on a recovered backend
	close(stop)
	<-fed
	// With the traffic over, the backlog drains: OK again.
	var healed map[string]string
	if !within(30*time.Second, func() bool { healed = aggregatorStatuses(t, healthPort); return allStatus(healed, "StatusOK") }) {
		t.Errorf("health check after recovery: %v, want every window_aggregator instance StatusOK again", healed)
	}
	// W follows the records but stays at least max_out_of_orderness behind the wall clock: a span
	// sent once the last window of the traffic has ended by more than that closes it. Then every
	// point that fired is delivered or counted as dropped; the flush span's own window, left open,
	// is not in the count.
	time.Sleep(1500 * time.Millisecond)
	exportTraces(t, c, svcSpans(flushService, "/flush", time.Now().UnixNano()))
	want := len(feed.sent) * outputs
	var delivered int
	var dropped, allDrops float64
	settled := within(30*time.Second, func() bool {
		samples := scrape(t, telPort)
		dropped, _ = telemetrySum(samples, "otelcol_window_aggregator_dropped_points", map[string]string{"reason": "queue_full"})
		allDrops, _ = telemetrySum(samples, "otelcol_window_aggregator_dropped_points", nil)
		backend.mu.Lock()
		delivered = backend.points
		backend.mu.Unlock()
		return delivered+int(allDrops) >= want
	})
	close(sampling)
	<-sampled
	col.stop(t)

	feed.mu.Lock()
	defer feed.mu.Unlock()
	backend.mu.Lock()
	defer backend.mu.Unlock()

	// The senders: every export accepted, p99 under 1 s.
	if len(feed.failed) > 0 {
		t.Errorf("%d of %d exports to the collector failed, the first: %v", len(feed.failed), len(feed.latency), feed.failed[0])
	}
	lat := slices.Clone(feed.latency)
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	if p99 > time.Second {
		t.Errorf("export p99 %v over 1 s while the backend stalled (max %v)", p99, lat[len(lat)-1])
	}

	// Every point delivered or counted as dropped, and every delivered count is the true one.
	if !settled || delivered+int(allDrops) != want {
		t.Errorf("delivered %d + dropped %v (queue_full %v) points, want the %d that fired", delivered, allDrops, dropped, want)
	}
	if dropped == 0 {
		t.Errorf("no point dropped: the outage did not exceed emit.max_pending_points, so the bound was not tried")
	}
	wrong := 0
	for k, v := range backend.counts {
		if feed.sent[k] != v {
			if wrong++; wrong <= 3 {
				t.Errorf("delivered count %v for %s, sent %v", v, k, feed.sent[k])
			}
		}
	}

	// No request over the points bound nor over 4 MiB.
	maxBytes, maxPoints := 0, 0
	for _, r := range backend.requests {
		maxBytes, maxPoints = max(maxBytes, r.bytes), max(maxPoints, r.points)
	}
	if maxBytes > 4<<20 || maxPoints > 2000 {
		t.Errorf("largest request %d bytes, %d points: want at most 4 MiB and emit.max_points_per_send (2000)", maxBytes, maxPoints)
	}

	// Memory. The outage and the recovery may add the pending points (bounded by max_pending_points)
	// and the request the exporter retries; the Go heap's GC target doubles what is live. In all, the
	// README's formula for the series held (no sketch; A = 200 with fold; P = (size + ooo +
	// max_future_skew) / slide + 1 panes of 150 bytes; keys of about 16 bytes), the pending points,
	// and what the receiver and exporter hold, doubled.
	before, after := peaks[0].Load(), peaks[1].Load()
	pendingBytes := int64(maxPending * pointBytes)
	if limit := 2*pendingBytes + 16<<20; after-before > limit {
		t.Errorf("RSS grew by %d MB in and after the outage (%d MB before, peak %d MB), over 2 × %d MB of pending points + 16 MB",
			(after-before)>>20, before>>20, after>>20, pendingBytes>>20)
	}
	formula := int64(services*names)*(550+16+200+int64(3.5*150)) + pendingBytes
	if limit := idle + 2*formula + 32<<20; after > limit {
		t.Errorf("RSS peaked at %d MB, over the idle %d MB + 2 × the formula's %d MB + 32 MB", after>>20, idle>>20, formula>>20)
	}
	t.Logf("series %d; RSS idle %d MB, peak before the %v outage %d MB, in and after it %d MB (formula %d MB); exports %d, p99 %v, max %v; "+
		"points fired %d, delivered %d in %d requests (largest %d B, %d points), dropped %v (queue_full); refused sends %d",
		services*names, idle>>20, outage, before>>20, after>>20, formula>>20, len(lat), p99, lat[len(lat)-1],
		want, delivered, len(backend.requests), maxBytes, maxPoints, dropped, backend.refused)
}
