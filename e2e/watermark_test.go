package e2e

// Live-traffic tests of the watermark on the built distribution: wall-clock timestamps, short windows,
// and the expectations worked out from the contract (W <= now - max_out_of_orderness; a record stamped
// ahead of the clock is aggregated but cannot push W past it; the idle rule does not count the time
// the collector was down; a record that reaches a running instance before its Shutdown returns is
// aggregated and delivered or saved).

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// telemetryConfig is the service::telemetry section that serves the collector's own metrics over a
// Prometheus pull endpoint on a loopback port.
func telemetryConfig(port int) string {
	return fmt.Sprintf(`
  telemetry:
    metrics:
      level: normal
      readers:
        - pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}`, port)
}

// wmSeq makes span IDs unique across requests.
var wmSeq atomic.Uint64

// svcSpans is one request from one host: a resource with service.name, a server span per end time.
func svcSpans(service, name string, ends ...int64) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	for _, end := range ends {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(name)
		sp.SetKind(ptrace.SpanKindServer)
		n := wmSeq.Add(1)
		sp.SetTraceID(pcommon.TraceID{9, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		sp.SetSpanID(pcommon.SpanID{7, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		sp.SetEndTimestamp(pcommon.Timestamp(end))
		sp.SetStartTimestamp(pcommon.Timestamp(end - int64(5*time.Millisecond)))
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

// svcLogs is one request from one host: a log record per timestamp.
func svcLogs(service string, ts ...int64) plogotlp.ExportRequest {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", service)
	sl := rl.ScopeLogs().AppendEmpty()
	for _, t := range ts {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(t))
		lr.SetSeverityText("INFO")
		lr.Body().SetStr("hello")
	}
	return plogotlp.NewExportRequestFromLogs(ld)
}

// winKey is a series (its attributes, as attrString prints them) and a window start in Unix seconds.
type winKey struct {
	attrs string
	start int64
}

// ledger counts what was sent, per metric, series and window.
type ledger struct {
	mu   sync.Mutex
	size int64 // window size, ns
	n    map[string]map[winKey]int
}

func newLedger(size time.Duration) *ledger {
	return &ledger{size: int64(size), n: map[string]map[winKey]int{}}
}

// add counts records at times ts under metric for the series attrs ("service.name=a"): each in the one
// epoch-aligned window [t - t mod size, +size) (tumbling windows).
func (l *ledger) add(metric, attrs string, ts ...int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.n[metric]
	if m == nil {
		m = map[winKey]int{}
		l.n[metric] = m
	}
	for _, t := range ts {
		m[winKey{attrs, (t - t%l.size) / sec}]++
	}
}

func (l *ledger) get(metric string) map[winKey]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[winKey]int{}
	for k, v := range l.n[metric] {
		out[k] = v
	}
	return out
}

func (l *ledger) total(metric string) int {
	n := 0
	for _, v := range l.get(metric) {
		n += v
	}
	return n
}

// windowTotals sums the points of metric per series and window start, checking each point's window.
func windowTotals(t *testing.T, srv *otlpServer, metric string, size time.Duration) map[winKey]float64 {
	t.Helper()
	out := map[winKey]float64{}
	for _, p := range srv.points(0) {
		if p.metric != metric {
			continue
		}
		if p.end-p.start != int64(size/time.Second) || p.start%int64(size/time.Second) != 0 {
			t.Errorf("%s{%s}: window [%d, %d), want an epoch-aligned window of %s", metric, p.attrs, p.start, p.end, size)
		}
		out[winKey{p.attrs, p.start}] += p.value
	}
	return out
}

// diffTotals compares received totals with the ledger: "" when equal, else what differs.
func diffTotals(got map[winKey]float64, want map[winKey]int) string {
	var diffs []string
	for k, w := range want {
		if got[k] != float64(w) {
			diffs = append(diffs, fmt.Sprintf("{%s} window at %d: got %v, sent %d", k.attrs, k.start, got[k], w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("{%s} window at %d: got %v, sent nothing", k.attrs, k.start, g))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "\n")
}

// lateRec is a routed late record as the test's server received it.
type lateRec struct {
	signal, service, name, reason string
	watermark                     int64 // 0: absent
}

func (s *otlpServer) lateRecords() []lateRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []lateRec
	rec := func(signal string, res, attrs pcommon.Map, name string) {
		r := lateRec{signal: signal, name: name}
		if v, ok := res.Get("service.name"); ok {
			r.service = v.Str()
		}
		if v, ok := attrs.Get("window_aggregator.late.reason"); ok {
			r.reason = v.Str()
		}
		if v, ok := attrs.Get("window_aggregator.late.watermark"); ok {
			r.watermark = v.Int()
		}
		out = append(out, r)
	}
	for _, req := range s.traces {
		rss := req.Traces().ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
				sps := rss.At(i).ScopeSpans().At(j).Spans()
				for k := 0; k < sps.Len(); k++ {
					rec("span", rss.At(i).Resource().Attributes(), sps.At(k).Attributes(), sps.At(k).Name())
				}
			}
		}
	}
	for _, req := range s.logs {
		rls := req.Logs().ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			for j := 0; j < rls.At(i).ScopeLogs().Len(); j++ {
				lrs := rls.At(i).ScopeLogs().At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					rec("log", rls.At(i).Resource().Attributes(), lrs.At(k).Attributes(), "log")
				}
			}
		}
	}
	return out
}

// promSample is one line of the Prometheus text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads the collector's own metrics.
func scrape(t *testing.T, port int) []promSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping the collector's telemetry: %v", err)
	}
	defer resp.Body.Close()
	var out []promSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		s := promSample{labels: map[string]string{}, value: v}
		head := line[:sp]
		if i := strings.IndexByte(head, '{'); i >= 0 {
			s.name = head[:i]
			for _, kv := range strings.Split(strings.TrimSuffix(head[i+1:], "}"), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					s.labels[k] = strings.Trim(v, `"`)
				}
			}
		} else {
			s.name = head
		}
		out = append(out, s)
	}
	return out
}

// telemetrySum adds the samples of the metric base (with the exporter's _total or unit suffix) whose
// labels include want; found reports whether any sample matched.
func telemetrySum(samples []promSample, base string, want map[string]string) (sum float64, found bool) {
next:
	for _, s := range samples {
		if s.name != base && s.name != base+"_total" && s.name != base+"_seconds" {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		sum, found = sum+s.value, true
	}
	return sum, found
}

// checkNoneLateBut fails the test for every routed late record of a service other than except.
func checkNoneLateBut(t *testing.T, srv *otlpServer, except string) {
	t.Helper()
	n, first := map[string]int{}, map[string]lateRec{}
	for _, r := range srv.lateRecords() {
		if r.service != except {
			k := r.signal + "s of " + r.service + ", " + r.reason
			if n[k] == 0 {
				first[k] = r
			}
			n[k]++
		}
	}
	for k, c := range n {
		t.Errorf("%d %s, routed late (the first judged by W = %s)", c, k, time.Unix(0, first[k].watermark).Format("15:04:05.000"))
	}
}

// firings records when the first point of each window of a metric reached the server.
type firings struct {
	srv    *otlpServer
	metric string
	seen   map[winKey]time.Time
}

func (f *firings) poll() {
	now := time.Now()
	for _, p := range f.srv.points(0) {
		k := winKey{p.attrs, p.start}
		if _, ok := f.seen[k]; !ok && p.metric == f.metric {
			f.seen[k] = now
		}
	}
}

// checkPrompt checks that every window of the series attrs that closed (end + ooo) at least margin
// before until fired within margin of closing, and that there were at least min of them.
func (f *firings) checkPrompt(t *testing.T, sent map[winKey]int, attrs string, size, ooo, margin time.Duration, from, until time.Time, min int) {
	t.Helper()
	n := 0
	for k := range sent {
		if k.attrs != attrs {
			continue
		}
		closes := time.Unix(k.start, 0).Add(size + ooo)
		if closes.Before(from) || closes.Add(margin).After(until) {
			continue
		}
		n++
		seen, ok := f.seen[k]
		if !ok {
			t.Errorf("{%s} window at %d closed at %s (W >= its end) but had not fired %s later, while traffic ran",
				attrs, k.start, closes.Format("15:04:05.000"), until.Sub(closes).Round(time.Millisecond))
			continue
		}
		if d := seen.Sub(closes); d > margin {
			t.Errorf("{%s} window at %d fired %s after W could pass its end (want within %s)", attrs, k.start, d.Round(time.Millisecond), margin)
		}
	}
	if n < min {
		t.Errorf("only %d windows of {%s} closed while traffic ran; want at least %d", n, attrs, min)
	}
}

// jittered returns n event times: now minus up to max of jitter.
func jittered(now time.Time, n int, max time.Duration) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = now.Add(-rand.N(max)).UnixNano()
	}
	return out
}

// within polls cond every 20 ms until it holds (true) or d passes (false).
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// exportWithin sends req through export (an OTLP client's Export) with a deadline of 10 s, and fails
// the test if it returns an error.
func exportWithin[Req, Resp any](t *testing.T, export func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := export(ctx, req); err != nil {
		t.Fatal(err)
	}
}

func exportTraces(t *testing.T, c *client, req ptraceotlp.ExportRequest) {
	t.Helper()
	exportWithin(t, c.traces.Export, req)
}

func exportLogs(t *testing.T, c *client, req plogotlp.ExportRequest) {
	t.Helper()
	exportWithin(t, c.logs.Export, req)
}

// connectorWatermarkConfig is the connector form with one span aggregation (count by service.name),
// late spans routed to the test's server, and the collector's own metrics on telPort. With a
// storageDir, the component keeps its state in file_storage there, checkpointed every second.
func connectorWatermarkConfig(recv, telPort int, out, watermark, lateness, storageDir string) string {
	var extensions, storage, serviceExtensions string
	if storageDir != "" {
		extensions = fileStorageExtension(storageDir)
		storage = `
    storage: file_storage/wa
    checkpoint: {interval: 1s}`
		serviceExtensions = `
  extensions: [file_storage/wa]`
	}
	return extensions + otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 2s}
`+windowByWindow+`
    watermark: %s
    allowed_lateness: %s%s
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name], outputs: [count]}
exporters:%s
service:%s%s
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp_grpc]}
    traces/late: {receivers: [window_aggregator], exporters: [otlp_grpc]}
`, watermark, lateness, storage, otlpExporter("otlp_grpc", out), serviceExtensions, telemetryConfig(telPort))
}

// checkProbe sends a span stamped 30 s in the past, which is expired, and checks the watermark it was
// judged by (window_aggregator.late.watermark): W <= now - ooo at every moment, and here, where a
// record ahead of the clock holds W at the clock, W = now - ooo for a now within the send.
func checkProbe(t *testing.T, c *client, srv *otlpServer, ooo time.Duration) {
	t.Helper()
	before := time.Now()
	exportTraces(t, c, svcSpans("probe", "probe", before.Add(-30*time.Second).UnixNano()))
	after := time.Now()
	var probe lateRec
	eventually(t, "the expired probe span routed late", func() bool {
		for _, r := range srv.lateRecords() {
			if r.service == "probe" {
				probe = r
				return true
			}
		}
		return false
	})
	const eps = int64(5 * time.Millisecond)
	if probe.reason != "expired" {
		t.Errorf("probe: late.reason %q, want expired", probe.reason)
	}
	if hi := after.Add(-ooo).UnixNano(); probe.watermark > hi+eps {
		t.Errorf("probe judged by W = %s, ahead of the collector's clock less max_out_of_orderness (<= %s)",
			time.Unix(0, probe.watermark).Format("15:04:05.000"), time.Unix(0, hi).Format("15:04:05.000"))
	}
	if lo := before.Add(-ooo).UnixNano(); probe.watermark < lo-eps {
		t.Errorf("probe judged by W = %s; a record ahead of the clock holds W at now - max_out_of_orderness (>= %s)",
			time.Unix(0, probe.watermark).Format("15:04:05.000"), time.Unix(0, lo).Format("15:04:05.000"))
	}
}

// liveRun is the connector form (connectorWatermarkConfig) on live traffic from on-time services: the
// spans sent, counted under lat.count by service.name, and when each window of lat.count first
// reached the server.
type liveRun struct {
	t      *testing.T
	size   time.Duration
	out    *otlpServer
	tel    int // the port of the collector's own metrics
	col    *collector
	c      *client
	sent   *ledger
	fired  *firings
	onTime []string
}

// startLiveRun starts the distribution on connectorWatermarkConfig with watermark and lateness (no
// storage) for windows of size and traffic from the services onTime.
func startLiveRun(t *testing.T, size time.Duration, watermark, lateness string, onTime ...string) *liveRun {
	t.Helper()
	out := startServer(t)
	recv, tel := freePort(t), freePort(t)
	col, c := runCollector(t, recv, connectorWatermarkConfig(recv, tel, out.addr, watermark, lateness, ""))
	return &liveRun{t: t, size: size, out: out, tel: tel, col: col, c: c, sent: newLedger(size),
		fired: &firings{srv: out, metric: "lat.count", seen: map[winKey]time.Time{}}, onTime: onTime}
}

// send exports one request of spans of service svc ending at ends, and counts them as sent.
func (r *liveRun) send(svc string, ends ...int64) {
	r.t.Helper()
	exportTraces(r.t, r.c, svcSpans(svc, "op", ends...))
	r.sent.add("lat.count", "service.name="+svc, ends...)
}

// traffic ticks every 150 ms, at most ticks times and for no longer than d: on each tick it sends
// three spans per on-time service, ending up to 200 ms before the tick, calls also (when not nil)
// with the tick's number and time, and polls the firings. It returns when the traffic began and ended.
func (r *liveRun) traffic(d time.Duration, ticks int, also func(n int, now time.Time)) (from, until time.Time) {
	r.t.Helper()
	from = time.Now()
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for n := 0; n < ticks && time.Since(from) < d; n++ {
		<-tick.C
		now := time.Now()
		for _, svc := range r.onTime {
			r.send(svc, jittered(now, 3, 200*time.Millisecond)...)
		}
		if also != nil {
			also(n, now)
		}
		r.fired.poll()
	}
	return from, time.Now()
}

// checkPrompt runs firings.checkPrompt for every on-time service, with a margin of 1.5 s.
func (r *liveRun) checkPrompt(ooo time.Duration, from, until time.Time, min int) {
	r.t.Helper()
	for _, svc := range r.onTime {
		r.fired.checkPrompt(r.t, r.sent.get("lat.count"), "service.name="+svc, r.size, ooo, 1500*time.Millisecond, from, until, min)
	}
}

// finish checks the probe (checkProbe), stops the collector with SIGTERM, which fires every open
// window (there is no storage), and checks that every window counts what was sent and that nothing
// but the probe was routed late.
func (r *liveRun) finish(ooo time.Duration) {
	r.t.Helper()
	checkProbe(r.t, r.c, r.out, ooo)
	r.col.stop(r.t)
	if d := diffTotals(windowTotals(r.t, r.out, "lat.count", r.size), r.sent.get("lat.count")); d != "" {
		r.t.Errorf("counts per window differ from what was sent:\n%s", d)
	}
	checkNoneLateBut(r.t, r.out, "probe")
}

// Several services send on-time spans continuously; one host's clock runs two minutes ahead. W follows
// the clock, not the skewed host: no on-time span is late, every window fires on time and counts what
// was sent, and the skewed spans are aggregated into their own (future) windows.
func TestSkewedHostDoesNotMakeOthersLate(t *testing.T) {
	skipShort(t)
	const size, ooo = 2 * time.Second, time.Second
	r := startLiveRun(t, size, "{max_out_of_orderness: 1s}", "3s", "a", "b", "c")
	skewed := 0
	start, end := r.traffic(7*time.Second, 60, func(_ int, now time.Time) {
		ahead := jittered(now.Add(2*time.Minute), 2, 200*time.Millisecond)
		r.send("skewed", ahead...)
		skewed += len(ahead)
	})
	r.fired.poll()
	r.checkPrompt(ooo, start, end, 2)

	// The collector's own view: the skewed spans are counted as ahead of the clock, and W lags the
	// clock by max_out_of_orderness, held there by the clock.
	samples := scrape(t, r.tel)
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_clock_skew_records", map[string]string{"reason": "ahead_of_clock"}); n != float64(skewed) {
		t.Errorf("clock_skew_records{reason=ahead_of_clock} = %v, want the %d skewed spans", n, skewed)
	}
	if lag, ok := telemetrySum(samples, "otelcol_window_aggregator_watermark_lag", map[string]string{"held_by": "clock"}); !ok || lag < ooo.Seconds() || lag > ooo.Seconds()+1 {
		t.Errorf("watermark_lag{held_by=clock} = %v (present: %v), want max_out_of_orderness (%v s): W <= now - max_out_of_orderness", lag, ok, ooo.Seconds())
	}
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_late_records", nil); n != 0 {
		t.Errorf("late_records = %v before the probe, want 0", n)
	}
	// The final SIGTERM fires the skewed host's future windows too.
	r.finish(ooo)
	t.Logf("sent %d on-time spans and %d skewed ones in %s", r.sent.total("lat.count")-skewed, skewed, end.Sub(start).Round(time.Millisecond))
}

// One stray span stamped 60 s ahead, amid live on-time traffic, with the idle rule on and a silence
// longer than idle_timeout: nothing after it is late, and every window counts what was sent.
func TestStraySpanAheadOfClock(t *testing.T) {
	skipShort(t)
	const size, ooo, idle = 2 * time.Second, time.Second, 3 * time.Second
	r := startLiveRun(t, size, "{max_out_of_orderness: 1s, idle_timeout: 3s}", "2s", "a", "b")
	r.traffic(2*time.Second, 50, func(n int, now time.Time) {
		if n == 6 {
			r.send("stray", now.Add(time.Minute).UnixNano())
		}
	})
	// Silence: longer than idle_timeout, no record at all.
	silence := time.Now()
	time.Sleep(idle + 1500*time.Millisecond)
	r.fired.poll()
	from, until := r.traffic(5*time.Second, 50, nil)
	r.fired.poll()
	// The windows that close after the silence, while traffic runs again.
	r.checkPrompt(ooo, from, until, 1)
	if n, _ := telemetrySum(scrape(t, r.tel), "otelcol_window_aggregator_late_records", nil); n != 0 {
		t.Errorf("late_records = %v, want 0", n)
	}
	r.finish(ooo)
	t.Logf("silence of %s; %d spans sent", from.Sub(silence).Round(time.Millisecond), r.sent.total("lat.count"))
}

// agent generates live spans on a ticker and sends them while the collector is up; while it is down
// it queues them, and it sends the queue, oldest first, as soon as the collector is back.
type agent struct {
	sent *ledger

	mu     sync.Mutex // held while sending: pause waits for the send in flight
	c      *client    // nil while the collector is down
	queue  []ptraceotlp.ExportRequest
	queued int // spans generated while down
	errs   []error
}

func (a *agent) generate(services []string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, svc := range services {
		name := "live"
		if a.c == nil {
			name = "queued"
		}
		ends := jittered(now, 3, 200*time.Millisecond)
		a.queue = append(a.queue, svcSpans(svc, name, ends...))
		a.sent.add("lat.count", "service.name="+svc, ends...)
		if a.c == nil {
			a.queued += len(ends)
		}
	}
	a.flushLocked()
}

// flushLocked sends the queue, oldest first, stopping at the first error (under mu).
func (a *agent) flushLocked() {
	for a.c != nil && len(a.queue) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := a.c.traces.Export(ctx, a.queue[0])
		cancel()
		if err != nil {
			a.errs = append(a.errs, err)
			return
		}
		a.queue = a.queue[1:]
	}
}

func (a *agent) pause() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.c = nil
}

// resume sends the queue right away and reports how many requests it held, and how many spans were
// made while the collector was down.
func (a *agent) resume(c *client) (requests, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	requests, queued = len(a.queue), a.queued
	a.c = c
	a.flushLocked()
	return requests, queued
}

// The collector restarts (with file_storage) while live traffic goes on: an agent queues what is made
// while the collector is down, for longer than idle_timeout, and sends it once the collector is back
// (1.5 s after it is up, within idle_timeout of the start). The downtime is not silence: nothing
// queued is late, and the totals over both runs are what was sent.
func TestRestartWithStorageDuringLiveTraffic(t *testing.T) {
	skipShort(t)
	const size, ooo, idle = 2 * time.Second, time.Second, 3 * time.Second
	out := startServer(t)
	dir := t.TempDir()
	recv, tel := freePort(t), freePort(t)
	addr := loopback(recv)
	config := connectorWatermarkConfig(recv, tel, out.addr, "{max_out_of_orderness: 1s, idle_timeout: 3s}", "2s", dir)

	services := []string{"a", "b"}
	a := &agent{sent: newLedger(size)}
	col := startCollector(t, config, addr)
	a.resume(dial(t, addr))

	var stopGen atomic.Bool
	genDone := make(chan struct{})
	go func() {
		defer close(genDone)
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for n := 0; n < 300 && !stopGen.Load(); n++ {
			now := <-tick.C
			a.generate(services, now)
		}
	}()
	defer func() { stopGen.Store(true); <-genDone }()

	time.Sleep(3 * time.Second) // live traffic, first run
	a.pause()
	col.stop(t)
	downFrom := time.Now()
	time.Sleep(idle + 5*time.Second) // the agent queues meanwhile
	col = startCollector(t, config, addr)
	up := time.Now()
	// The agent's next retry finds the collector back a moment after it is up: later than the
	// component's ticker first runs, sooner than idle_timeout after the start.
	time.Sleep(1500 * time.Millisecond)
	c := dial(t, addr)
	requests, queued := a.resume(c)
	t.Logf("down %s; %d queued requests (%d spans) sent %s after the restart", up.Sub(downFrom).Round(time.Millisecond),
		requests, queued, time.Since(up).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // live traffic, second run
	stopGen.Store(true)
	<-genDone
	a.mu.Lock()
	errs, left := a.errs, len(a.queue)
	a.mu.Unlock()
	if len(errs) > 0 || left > 0 {
		t.Fatalf("sending: %v; %d requests left in the queue", errs, left)
	}

	// Once the traffic stops, the idle rule closes the last windows: every window's total is what was
	// sent, over both runs.
	want := a.sent.get("lat.count")
	var diff string
	if !within(15*time.Second, func() bool {
		diff = diffTotals(windowTotals(t, out, "lat.count", size), want)
		return diff == ""
	}) {
		t.Errorf("once the traffic stopped and idle_timeout passed, counts per window differ from what was sent:\n%s", diff)
	}
	samples := scrape(t, tel)
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_late_records", nil); n != 0 {
		t.Errorf("second run: late_records = %v, want 0", n)
	}
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_records", map[string]string{"outcome": "late"}); n != 0 {
		t.Errorf("second run: records{outcome=late} = %v, want 0", n)
	}
	col.stop(t)
	if late := out.lateRecords(); len(late) > 0 {
		n := map[string]int{}
		for _, r := range late {
			n[r.name+"/"+r.reason]++
		}
		t.Errorf("%d spans routed late (by span name and reason: %v)", len(late), n)
	}
	if d := diffTotals(windowTotals(t, out, "lat.count", size), want); d != "" {
		t.Errorf("after the final stop, counts per window differ from what was sent:\n%s", d)
	}
}

// holdConfig: spans and logs each pass a batch processor that holds them until its own Shutdown
// (send_batch_size far above what is sent, timeout 1m), into window_aggregator as a connector (proc
// false) or as a processor with file_storage in dir (proc true; without the batch processors when hold
// is false, with the same window_aggregator settings, so that the state restores).
func holdConfig(recv int, out, dir string, proc, hold bool) string {
	wa := `
    window: {size: 1s}
` + windowByWindow + `
    watermark: {max_out_of_orderness: 500ms}
    allowed_lateness: 30s
    aggregations:
      - {name: spans, signal: spans, group_by: [service.name], outputs: [count]}
      - {name: logs, signal: logs, group_by: [service.name], outputs: [count]}`
	head := otlpReceiver(recv) + `
exporters:` + otlpExporter("otlp_grpc", out) + `
  debug: {verbosity: basic}
`
	if !proc {
		return head + `
processors:
  batch/hold: {send_batch_size: 1000000, timeout: 1m}
connectors:
  window_aggregator:` + wa + `
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], processors: [batch/hold], exporters: [window_aggregator]}
    logs: {receivers: [otlp], processors: [batch/hold], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp_grpc]}
    traces/late: {receivers: [window_aggregator], exporters: [otlp_grpc]}
    logs/late: {receivers: [window_aggregator], exporters: [otlp_grpc]}
`
	}
	through := "[batch/hold, window_aggregator]"
	if !hold {
		through = "[window_aggregator]"
	}
	return head + fileStorageExtension(dir) + `
processors:
  batch/hold: {send_batch_size: 1000000, timeout: 1m}
  window_aggregator:` + wa + `
    storage: file_storage/wa
    checkpoint: {interval: 1h}
service:
  extensions: [file_storage/wa]
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], processors: ` + through + `, exporters: [debug]}
    logs: {receivers: [otlp], processors: ` + through + `, exporters: [debug]}
    metrics: {receivers: [otlp], processors: [window_aggregator], exporters: [otlp_grpc]}
`
}

// sendHeld sends 100 logs and 50 spans of service "app" as live traffic over about 1.5 s (ten rounds
// of 10 logs and 5 spans), and returns them counted for windows of size.
func sendHeld(t *testing.T, c *client, size time.Duration) *ledger {
	t.Helper()
	sent := newLedger(size)
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for range 10 {
		now := <-tick.C
		ls := jittered(now, 10, 100*time.Millisecond)
		exportLogs(t, c, svcLogs("app", ls...))
		sent.add("logs.count", "service.name=app", ls...)
		ss := jittered(now, 5, 100*time.Millisecond)
		exportTraces(t, c, svcSpans("app", "op", ss...))
		sent.add("spans.count", "service.name=app", ss...)
	}
	return sent
}

// SIGTERM while batch processors hold spans and logs in two pipelines: the collector shuts the
// pipelines down in no fixed order, and whichever comes last, its records reach the running connector
// before its Shutdown returns, so they are aggregated and delivered, never routed as expired.
func TestSIGTERMWithBatchProcessorHoldingRecords(t *testing.T) {
	skipShort(t)
	const size = time.Second
	for rep := range 8 {
		out := startServer(t)
		recv := freePort(t)
		col, c := runCollector(t, recv, holdConfig(recv, out.addr, "", false, true))
		sent := sendHeld(t, c, size)
		// Every Export has returned: the batch processors hold all of it, and nothing reached the
		// connector yet.
		if n := len(out.points(0)); n != 0 {
			t.Fatalf("run %d: %d points before SIGTERM: the batch processors were meant to hold every record", rep, n)
		}
		col.stop(t)
		for _, m := range []string{"spans.count", "logs.count"} {
			if d := diffTotals(windowTotals(t, out, m, size), sent.get(m)); d != "" {
				t.Errorf("run %d: %s (sent %d) differs from what was sent:\n%s", rep, m, sent.total(m), d)
			}
		}
		if late := out.lateRecords(); len(late) > 0 {
			t.Errorf("run %d: %d records routed late, e.g. %+v", rep, len(late), late[0])
		}
		if t.Failed() {
			t.Logf("run %d: collector output:\n%s", rep, col.output.String())
			return
		}
	}
}

// The processor form with file_storage: SIGTERM while batch processors hold spans and logs, then a
// restart and a record that closes their windows: every log and span is counted over the two runs,
// whatever order the pipelines (the metrics one included) shut down in.
func TestSIGTERMWithBatchProcessorHoldingRecordsProcessorStorage(t *testing.T) {
	skipShort(t)
	const size, ooo = time.Second, 500 * time.Millisecond
	for rep := range 4 {
		out := startServer(t)
		dir := t.TempDir()
		recv := freePort(t)
		col, c := runCollector(t, recv, holdConfig(recv, out.addr, dir, true, true))
		sent := sendHeld(t, c, size)
		lastEnd := int64(0)
		for _, m := range []string{"spans.count", "logs.count"} {
			for k := range sent.get(m) {
				lastEnd = max(lastEnd, (k.start+1)*sec)
			}
		}
		col.stop(t)
		first := col.output.String()

		// The second run without the batch processors (same window_aggregator settings), so that a
		// record that closes every window of the first run reaches the component at once.
		col, c = runCollector(t, recv, holdConfig(recv, out.addr, dir, true, false))
		// W = its time - ooo >= their ends (W cannot pass the clock, so it is sent once the clock is there).
		if d := time.Until(time.Unix(0, lastEnd).Add(ooo + 50*time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
		exportTraces(t, c, svcSpans("closer", "op", time.Now().UnixNano()))
		var diff string
		if !within(15*time.Second, func() bool {
			var diffs []string
			for _, m := range []string{"spans.count", "logs.count"} {
				got := windowTotals(t, out, m, size)
				for k := range got {
					if k.attrs != "service.name=app" {
						delete(got, k)
					}
				}
				if d := diffTotals(got, sent.get(m)); d != "" {
					diffs = append(diffs, fmt.Sprintf("%s (sent %d):\n%s", m, sent.total(m), d))
				}
			}
			diff = strings.Join(diffs, "\n")
			return diff == ""
		}) {
			t.Errorf("run %d: counts over the two runs differ from what was sent:\n%s", rep, diff)
			t.Logf("run %d: first collector's output:\n%s", rep, first)
		}
		col.stop(t)
		if t.Failed() {
			return
		}
	}
}

// A window of 1m sliding by 1ms puts each record in 60000 windows: the distribution refuses it at
// startup, naming window.slide. 10000 windows per record is the limit, and is accepted.
func TestGeometryLimitFailsAtStartupNamingWindowSlide(t *testing.T) {
	skipShort(t)
	config := func(size, slide string) string {
		window := fmt.Sprintf("{size: %s, slide: %s}", size, slide)
		return writeConfig(t, "geometry.yaml", debugConfig(freePort(t), window, "[{name: a, signal: spans, outputs: [count]}]", "traces"))
	}
	bad := config("1m", "1ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, distBinary, "--config", bad).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the distribution kept running on window.size 1m, window.slide 1ms:\n%s", out)
	}
	if err == nil {
		t.Fatalf("the distribution exited cleanly on window.size 1m, window.slide 1ms:\n%s", out)
	}
	checkOutputContains(t, "startup error", out, "window.slide", "10000")
	if out, err := validate(config("10s", "1ms")); err != nil {
		t.Errorf("window.size 10s, window.slide 1ms (10000 windows per record) is within the limit: %v\n%s", err, out)
	}
}
