package e2e

// Helpers of the live-traffic tests: requests stamped with the wall clock, a ledger of what was sent per
// window, the collector's own metrics by scrape, and a run that sends jittered traffic and checks that
// each window fires within the time the contract allows.

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
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
