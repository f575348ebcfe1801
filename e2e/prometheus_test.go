package e2e

// The chain into a real Prometheus server: the distribution's prometheus exporter scraped by it, and
// its prometheus_remote_write exporter writing into it, directly (cumulative output) and through the
// delta_to_cumulative processor (delta output). Prometheus 2.42 (Debian's package, `make
// prometheus`) runs as a process on a loopback port; the test reads it back with PromQL.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// prometheusBinaryEnv names the Prometheus binary to run instead of the one `make prometheus` unpacks.
const prometheusBinaryEnv = "PROMETHEUS_BINARY"

// prometheusBinary is the Prometheus server to run: $PROMETHEUS_BINARY, else the one `make
// prometheus` unpacks into _build/prometheus. A missing binary fails the test: the chain must be
// tested, not skipped.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv(prometheusBinaryEnv)
	if path == "" {
		var err error
		if path, err = filepath.Abs(filepath.Join("..", "_build", "prometheus", "usr", "bin", "prometheus")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no Prometheus server at %s (%v): run `make prometheus` (or set %s)", path, err, prometheusBinaryEnv)
	}
	return path
}

// promServer is a Prometheus server running as a process, with its own TSDB in a fresh directory.
type promServer struct {
	addr   string // host:port of its web API
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan error
}

// startPrometheus runs Prometheus on a free loopback port with the remote-write receiver on
// (/api/v1/write) and one scrape job, named windowaggregator, that scrapes each of targets (host:port,
// path /metrics) every second, and waits until it is ready. flags are further command-line flags (e.g.
// --enable-feature=native-histograms: without it, Prometheus 2.42 answers a remote write that holds
// an exponential histogram with HTTP 500, which the exporter retries, holding back its queue). It is
// stopped (SIGTERM, then a wait) when the test ends.
func startPrometheus(t *testing.T, targets []string, flags ...string) *promServer {
	t.Helper()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, target := range targets {
		quoted[i] = strconv.Quote(target)
	}
	config := fmt.Sprintf(`
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: windowaggregator
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
	configPath := filepath.Join(dir, "prometheus.yml")
	writeFile(t, configPath, config)
	p := &promServer{addr: loopback(freePort(t)), output: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{
		"--config.file=" + configPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + p.addr,
		"--web.enable-remote-write-receiver",
	}, flags...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting Prometheus: %v", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("Prometheus output:\n%s", p.output.String())
		}
	})
	probe := &http.Client{Timeout: 2 * time.Second}
	waitUntilUp(t, "Prometheus", p.done, p.output, func() bool {
		resp, err := probe.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// stop sends SIGTERM and waits for Prometheus to exit, killing it after 30 s.
func (p *promServer) stop(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done: // already exited
		p.done <- err
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(30 * time.Second):
		t.Errorf("Prometheus did not stop within 30 s of SIGTERM; killing it")
		_ = p.cmd.Process.Kill()
		p.done <- <-p.done
	}
}

// remoteWriteURL is the endpoint of Prometheus' remote-write receiver.
func (p *promServer) remoteWriteURL() string {
	return "http://" + p.addr + "/api/v1/write"
}

// promResult is one sample of an instant vector that the query API returned.
type promResult struct {
	labels map[string]string // __name__ included
	t      float64           // Unix seconds
	value  float64
}

func (r promResult) String() string {
	keys := make([]string, 0, len(r.labels))
	for k := range r.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = fmt.Sprintf("%s=%q", k, r.labels[k])
	}
	return fmt.Sprintf("{%s} %v @%.3f", strings.Join(kv, ", "), r.value, r.t)
}

// formatResults prints results one a line, sorted, for failure messages.
func formatResults(results []promResult) string {
	lines := make([]string, len(results))
	for i, r := range results {
		lines[i] = "  " + r.String()
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// query runs an instant PromQL query at the current time through /api/v1/query and returns its vector
// (an error for another result type, or when Prometheus answers with an error).
func (p *promServer) query(q string) ([]promResult, error) {
	status, body, err := p.get("/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return nil, err
	}
	var answer struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("query %s: HTTP %d, %v: %s", q, status, err, body)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %s: %s: %s", q, answer.ErrorType, answer.Error)
	}
	if answer.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want a vector", q, answer.Data.ResultType)
	}
	out := make([]promResult, 0, len(answer.Data.Result))
	for _, r := range answer.Data.Result {
		ts, ok1 := r.Value[0].(float64)
		vs, ok2 := r.Value[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("query %s: malformed sample %v", q, r.Value)
		}
		v, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: sample value %q: %v", q, vs, err)
		}
		out = append(out, promResult{labels: r.Metric, t: ts, value: v})
	}
	return out, nil
}

// get sends a GET to Prometheus' API at path with args, and returns the answer's status and body.
func (p *promServer) get(path string, args url.Values) (status int, body []byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path+"?"+args.Encode(), nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// mustQuery is query, failing the test on an error.
func (p *promServer) mustQuery(t *testing.T, q string) []promResult {
	t.Helper()
	out, err := p.query(q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitQuery polls the instant query q until check accepts its vector (returns nil) or timeout
// passes, then fails the test with check's last complaint and the last vector. It returns the vector
// that check accepted.
func (p *promServer) waitQuery(t *testing.T, timeout time.Duration, q string, check func([]promResult) error) []promResult {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := p.query(q)
		if err == nil {
			if err = check(got); err == nil {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %s: %v\n%s", timeout, q, err, formatResults(got))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nonEmpty is a check for waitQuery: at least one sample.
func nonEmpty(got []promResult) error {
	if len(got) == 0 {
		return errors.New("no samples")
	}
	return nil
}

// approxEqual reports whether got is want within a relative 1e-9 (sums of float64 values).
func approxEqual(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// prometheusChainConfig is the distribution between an OTLP receiver on the loopback port recv and
// Prometheus: two connectors take the same spans with the same aggregation (a YAML flow mapping).
// window_aggregator/cumulative, with the default output settings, exports to the prometheus exporter
// on exporterPort (every series labelled path=scrape) and to the remote-write endpoint remoteWrite
// (path=remote_write); window_aggregator/delta, with deltaSettings besides (YAML lines of connector
// settings, e.g. "temporality: delta"), exports through the delta_to_cumulative processor to
// remoteWrite (path=delta_to_cumulative). Both connectors: 2 s tumbling windows, W = greatest event
// time - 1 s, 6 s of allowed lateness; no late-data pipeline, so expired spans are counted and dropped.
func prometheusChainConfig(recv, exporterPort int, remoteWrite, aggregation, deltaSettings string) string {
	const connector = `
    window: {size: 2s}
    watermark: {max_out_of_orderness: 1s}
    allowed_lateness: 6s
    aggregations: [%s]`
	cumulative := fmt.Sprintf(connector, aggregation)
	delta := cumulative
	for _, line := range strings.Split(strings.TrimSpace(deltaSettings), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			delta += "\n    " + line
		}
	}
	return chainConfig(recv, exporterPort, remoteWrite, cumulative, delta)
}

// chainConfig is prometheusChainConfig's distribution around the two connectors' settings,
// cumulative and delta (YAML lines indented for the connectors section).
func chainConfig(recv, exporterPort int, remoteWrite, cumulative, delta string) string {
	remoteWriteExporter := func(name, path string) string {
		return fmt.Sprintf(`
  %s:
    http:
      endpoint: %s
      tls: {insecure: true}
    external_labels: {path: %s}
    max_batch_request_parallelism: 1`, name, remoteWrite, path)
	}
	return fmt.Sprintf(`%s
connectors:
  window_aggregator/cumulative:%s
  window_aggregator/delta:%s
processors:
  delta_to_cumulative: {}
exporters:
  prometheus:
    endpoint: 127.0.0.1:%d
    const_labels: {path: scrape}%s%s
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator/cumulative, window_aggregator/delta]}
    metrics/cumulative: {receivers: [window_aggregator/cumulative], exporters: [prometheus, prometheus_remote_write/cumulative]}
    metrics/delta: {receivers: [window_aggregator/delta], processors: [delta_to_cumulative], exporters: [prometheus_remote_write/delta]}
`, otlpReceiver(recv), cumulative, delta, exporterPort,
		remoteWriteExporter("prometheus_remote_write/cumulative", "remote_write"),
		remoteWriteExporter("prometheus_remote_write/delta", "delta_to_cumulative"))
}

// prometheusExporters are entries of the exporters section: the prometheus exporter on exporterPort,
// its series labelled path=scrape, with promSettings besides (YAML flow entries, e.g.
// "enable_open_metrics: true"), and prometheus_remote_write to remoteWrite, labelled
// path=remote_write.
func prometheusExporters(exporterPort int, remoteWrite, promSettings string) string {
	if promSettings != "" {
		promSettings = "\n    " + promSettings
	}
	return fmt.Sprintf(`
  prometheus:
    endpoint: 127.0.0.1:%d
    const_labels: {path: scrape}%s
  prometheus_remote_write:
    endpoint: %s
    tls: {insecure: true}
    external_labels: {path: remote_write}`, exporterPort, promSettings, remoteWrite)
}

// chainPaths are the values of the path label of the three ways into Prometheus.
var chainPaths = []string{"scrape", "remote_write", "delta_to_cumulative"}

// latBounds are the explicit bucket bounds of the test's histogram, in ms.
var latBounds = []float64{10, 50, 100, 500}

// sentTotals is the ledger of what the test sent and the component must count: per service, the
// spans, the sum of their durations (ms), and per bound of latBounds then +Inf, the spans at or below
// it (Prometheus' cumulative le buckets; OpenTelemetry's explicit buckets are upper-inclusive too).
type sentTotals struct {
	count   map[string]float64
	sum     map[string]float64
	buckets map[string][]float64
}

func newSentTotals() *sentTotals {
	return &sentTotals{count: map[string]float64{}, sum: map[string]float64{}, buckets: map[string][]float64{}}
}

func (l *sentTotals) add(ss ...span) { l.addWeighted(1, ss...) }

// addWeighted enters spans that each stand for w spans (a sampled span's adjusted count).
func (l *sentTotals) addWeighted(w float64, ss ...span) {
	for _, s := range ss {
		l.count[s.service] += w
		l.sum[s.service] += w * s.ms
		b := l.buckets[s.service]
		if b == nil {
			b = make([]float64, len(latBounds)+1)
			l.buckets[s.service] = b
		}
		for i, bound := range latBounds {
			if s.ms <= bound {
				b[i] += w
			}
		}
		b[len(latBounds)] += w
	}
}

// byService keys a sample by its service_name label.
func byService(r promResult) string { return r.labels["service_name"] }

// byServiceAndLe keys a bucket sample by its service_name and le labels, le as a number (so that
// "10" and "10.0" are one bucket).
func byServiceAndLe(r promResult) string {
	le, err := strconv.ParseFloat(r.labels["le"], 64)
	if err != nil {
		return r.labels["service_name"] + " le=" + r.labels["le"]
	}
	return leKey(r.labels["service_name"], le)
}

func leKey(service string, le float64) string {
	return service + " le=" + strconv.FormatFloat(le, 'g', -1, 64)
}

// bucketWants is the ledger's buckets keyed as byServiceAndLe keys samples.
func (l *sentTotals) bucketWants() map[string]float64 {
	out := map[string]float64{}
	for svc, b := range l.buckets {
		for i, bound := range append(append([]float64(nil), latBounds...), math.Inf(1)) {
			out[leKey(svc, bound)] = b[i]
		}
	}
	return out
}

// equalBy is a check for waitQuery: the vector has exactly one sample per key of want (keys by key),
// with the wanted value (within approxEqual).
func equalBy(key func(promResult) string, want map[string]float64) func([]promResult) error {
	return func(got []promResult) error {
		var diffs []string
		seen := map[string]bool{}
		for _, r := range got {
			k := key(r)
			w, ok := want[k]
			switch {
			case seen[k]:
				diffs = append(diffs, fmt.Sprintf("%s: more than one series", k))
			case !ok:
				diffs = append(diffs, fmt.Sprintf("%s: %v, a series the test did not send", k, r.value))
			case !approxEqual(r.value, w):
				diffs = append(diffs, fmt.Sprintf("%s: %v, sent %v", k, r.value, w))
			}
			seen[k] = true
		}
		for k, w := range want {
			if !seen[k] {
				diffs = append(diffs, fmt.Sprintf("%s: no series, sent %v", k, w))
			}
		}
		if len(diffs) == 0 {
			return nil
		}
		sort.Strings(diffs)
		return errors.New(strings.Join(diffs, "; "))
	}
}

// allZero is a check for waitQuery: at least one sample, every one 0.
func allZero(got []promResult) error {
	if len(got) == 0 {
		return errors.New("no samples")
	}
	for _, r := range got {
		if r.value != 0 {
			return fmt.Errorf("%s is %v, want 0", r, r.value)
		}
	}
	return nil
}

// The whole chain gives true totals in Prometheus, by each of the three ways in: the latest value of
// every count, sum and explicit-bucket histogram series equals what was sent, late spans within
// allowed_lateness included and expired ones not, with no counter reset, through a window in which a
// service sent nothing and through late firings that arrive after their window's point reached
// Prometheus (which rejects a second, different sample for a series and timestamp, and the whole
// remote-write request with it). Cumulative output also has a point at every window end.
func TestPrometheusSeesTrueTotals(t *testing.T) {
	skipShort(t)
	prom, col, c := startChain(t)
	const timeout = 30 * time.Second

	// Event times a minute in the past, from B on a 2 s boundary: W (greatest event time - 1 s) is the
	// test's to move, and the remote-written samples (stamped at window ends) are within the query's
	// 5-minute lookback. Windows w0 = [B, B+2), w1 = [B+2, B+4), ...
	base := (time.Now().UnixNano()/(2*sec))*(2*sec) - 60*sec
	at := func(s float64) int64 { return base + int64(s*float64(sec)) }
	sent := newSentTotals()
	send := func(ss ...span) { // spans the component must count
		t.Helper()
		sent.add(ss...)
		sendAll(t, c, spans(ss...))
	}
	fired := func(end float64, paths ...string) { t.Helper(); waitFired(t, prom, at(end), paths...) }
	a := func(s, ms float64) span { return span{"a", "/x", at(s), ms} }
	b := func(s, ms float64) span { return span{"b", "/x", at(s), ms} }

	send(a(0.2, 5), a(0.6, 30), a(1.0, 70), b(0.4, 200), b(1.2, 800)) // w0, on time
	send(a(3.5, 30), a(3.6, 120))                                     // w1 (b sends nothing in w1); W = B+2.6: w0 fires
	fired(2)
	send(a(1.5, 200), b(1.9, 8))             // late for w0 (W < B+2+6)
	send(a(5.5, 70), a(5.0, 800), b(5.5, 5)) // w2; W = B+4.5: w1 fires
	fired(4)
	send(a(3.9, 8), b(0.8, 45))              // late for w1 and w0
	send(a(7.5, 30), b(7.5, 30), b(7.9, 70)) // w3; W = B+6.9: w2 fires
	fired(6)
	send(a(5.9, 450), b(1.0, 300)) // late for w2 and, last chance, w0
	send(a(9.5, 5))                // w4; W = B+8.5: w3 fires, w0 expires
	fired(8)
	sendAll(t, c, spans(a(1.1, 5)))                        // expired (W >= B+2+6): counted as dropped, in no total
	send(b(7.0, 120))                                      // late for w3
	sendAll(t, c, spans(span{"flush", "/x", at(13.5), 5})) // W = B+12.5: w4 and w5 fire; w6 (flush's) stays open
	fired(10)
	fired(12, "remote_write") // no records in w5: a cumulative point, no delta one

	// Cumulative points at B+2, B+4, ..., B+12: six per series.
	checkTrueTotals(t, prom, sent, col, 6)
}

// startChain starts Prometheus and the distribution on prometheusChainConfig with the count, sum
// and explicit histogram (10, 50, 100, 500 ms) of span durations by service.name, the defaults
// (temporality: cumulative, late_firings: fold, weight: adjusted_count) on one connector, delta on
// the other; and waits until Prometheus scrapes it.
func startChain(t *testing.T) (*promServer, *collector, *client) {
	t.Helper()
	recv, exporterPort := freePort(t), freePort(t)
	prom := startPrometheus(t, []string{loopback(exporterPort)})
	const aggregation = `{name: lat, signal: spans, group_by: [service.name], value: duration, unit: ms,
      outputs: [count, sum, histogram], histogram: {explicit: {buckets: [10ms, 50ms, 100ms, 500ms]}}}`
	col, c := runCollector(t, recv, prometheusChainConfig(recv, exporterPort, prom.remoteWriteURL(), aggregation, "temporality: delta"))
	prom.waitQuery(t, 30*time.Second, `up{job="windowaggregator"} == 1`, nonEmpty)
	return prom, col, c
}

// waitFired waits until service a's point at end (Unix ns) is in Prometheus by each of paths
// (default: both remote-write paths, whose samples carry the points' timestamps): the window ending
// there has fired and its point has gone all the way.
func waitFired(t *testing.T, prom *promServer, end int64, paths ...string) {
	t.Helper()
	if len(paths) == 0 {
		paths = []string{"remote_write", "delta_to_cumulative"}
	}
	want := float64(end) / 1e9
	q := fmt.Sprintf(`timestamp(lat_count_total{service_name="a", path=~%q})`, strings.Join(paths, "|"))
	prom.waitQuery(t, 30*time.Second, q, func(got []promResult) error {
		if len(got) != len(paths) {
			return fmt.Errorf("%d series, want one per path of %v", len(got), paths)
		}
		for _, r := range got {
			if r.value < want-1e-3 {
				return fmt.Errorf("%s: latest point at %v, want %v", r.labels["path"], r.value, want)
			}
		}
		return nil
	})
}

// checkTrueTotals checks what Prometheus holds by each of chainPaths against the ledger sent: the
// latest value of count, sum, histogram count, sum and buckets of every series (services a and b),
// no counter reset, as many remote-written cumulative points per series as points, no series for the
// flush span, and nothing refused on the way, in the logs of Prometheus and of col.
func checkTrueTotals(t *testing.T, prom *promServer, sent *sentTotals, col *collector, points float64) {
	t.Helper()
	const timeout = 30 * time.Second
	for _, path := range chainPaths {
		sel := fmt.Sprintf(`{path=%q, service_name!="flush"}`, path)
		prom.waitQuery(t, timeout, "lat_count_total"+sel, equalBy(byService, sent.count))
		prom.waitQuery(t, timeout, "lat_sum_milliseconds_total"+sel, equalBy(byService, sent.sum))
		prom.waitQuery(t, timeout, "lat_histogram_milliseconds_count"+sel, equalBy(byService, sent.count))
		prom.waitQuery(t, timeout, "lat_histogram_milliseconds_sum"+sel, equalBy(byService, sent.sum))
		prom.waitQuery(t, timeout, "lat_histogram_milliseconds_bucket"+sel, equalBy(byServiceAndLe, sent.bucketWants()))
		for _, metric := range []string{"lat_count_total", "lat_sum_milliseconds_total", "lat_histogram_milliseconds_count",
			"lat_histogram_milliseconds_sum", "lat_histogram_milliseconds_bucket"} {
			if err := allZero(prom.mustQuery(t, fmt.Sprintf("resets(%s%s[10m])", metric, sel))); err != nil {
				t.Errorf("path %s: resets(%s): %v", path, metric, err)
			}
		}
	}
	// Cumulative output: a point at every window end while the series lives, with or without records
	// in that window.
	prom.waitQuery(t, timeout, `count_over_time(lat_count_total{path="remote_write"}[10m])`,
		equalBy(byService, map[string]float64{"a": points, "b": points}))
	// The flush span's window never fired: no series for it by any path.
	if got := prom.mustQuery(t, `{__name__=~"lat_.*", service_name="flush"}`); len(got) != 0 {
		t.Errorf("series of the flush span, whose window never fired:\n%s", formatResults(got))
	}
	// Nothing was refused on the way: Prometheus rejects a second sample for a series and timestamp
	// (and the whole remote-write request with it), the prometheus exporter drops delta points it
	// cannot add up.
	for what, out := range map[string]string{"Prometheus": prom.output.String(), "the collector": col.output.String()} {
		for _, bad := range []string{"Out of order sample", "duplicate sample", "out of bounds", "Error appending remote write",
			"failed to send WriteRequest", "Exporting failed", "Misaligned"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s logged %q", what, bad)
			}
		}
	}
}

// A restart with storage continues every cumulative series from its saved totals and start:
// Prometheus, scraping and remote-written, sees the true totals across it and no counter reset.
func TestPrometheusSeesNoResetAcrossRestart(t *testing.T) {
	skipShort(t)
	recv, exporterPort := freePort(t), freePort(t)
	prom := startPrometheus(t, []string{loopback(exporterPort)})
	config := fileStorageExtension(t.TempDir()) + otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 2s}
    watermark: {max_out_of_orderness: 1s}
    allowed_lateness: 6s
    storage: file_storage/wa
    aggregations: [{name: lat, signal: spans, group_by: [service.name], outputs: [count, sum]}]
exporters:%s
service:
  extensions: [file_storage/wa]
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [prometheus, prometheus_remote_write]}
`, prometheusExporters(exporterPort, prom.remoteWriteURL(), ""))
	const timeout = 30 * time.Second
	base := (time.Now().UnixNano()/(2*sec))*(2*sec) - 60*sec
	at := func(s float64) int64 { return base + int64(s*float64(sec)) }
	sent := newSentTotals()
	a := func(s, ms float64) span { return span{"a", "/x", at(s), ms} }
	b := func(s, ms float64) span { return span{"b", "/x", at(s), ms} }
	// firedAt waits until a's remote-written point at B+end is in Prometheus.
	firedAt := func(end float64) {
		t.Helper()
		want := float64(at(end)) / 1e9
		prom.waitQuery(t, timeout, `timestamp(lat_count_total{service_name="a", path="remote_write"})`, func(got []promResult) error {
			if len(got) != 1 || got[0].value < want-1e-3 {
				return fmt.Errorf("%s, want a point at B+%v", formatResults(got), end)
			}
			return nil
		})
	}

	col, c := runCollector(t, recv, config)
	for _, batch := range [][]span{{a(0.2, 5), a(0.6, 30), b(0.4, 200)}, {a(2.5, 70)}, {a(5.1, 120)}} { // W = B+4.1
		sent.add(batch...)
		sendAll(t, c, spans(batch...))
	}
	firedAt(4)
	col.stop(t) // saves the series' totals; [4,6) is open

	col, c = runCollector(t, recv, config)
	for _, batch := range [][]span{{b(5.5, 800), a(7.2, 8)}, {a(8.5, 40)}} { // W = B+7.5
		sent.add(batch...)
		sendAll(t, c, spans(batch...))
	}
	sendAll(t, c, spans(span{"flush", "/x", at(11.5), 5})) // W = B+10.5: ends 6, 8 and 10 pass
	firedAt(10)

	for _, path := range []string{"scrape", "remote_write"} {
		sel := fmt.Sprintf(`{path=%q, service_name!="flush"}`, path)
		prom.waitQuery(t, timeout, "lat_count_total"+sel, equalBy(byService, sent.count))
		prom.waitQuery(t, timeout, "lat_sum_milliseconds_total"+sel, equalBy(byService, sent.sum))
		for _, metric := range []string{"lat_count_total", "lat_sum_milliseconds_total"} {
			if err := allZero(prom.mustQuery(t, fmt.Sprintf("resets(%s%s[10m])", metric, sel))); err != nil {
				t.Errorf("path %s: resets(%s) across the restart: %v", path, metric, err)
			}
		}
	}
	// A point at every window end, 2 to 10, before and after the restart, and none twice.
	prom.waitQuery(t, timeout, `count_over_time(lat_count_total{path="remote_write"}[10m])`,
		equalBy(byService, map[string]float64{"a": 5, "b": 5}))
	col.stop(t)
}
