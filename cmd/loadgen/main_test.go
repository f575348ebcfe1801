package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"

	"github.com/windowaggregator/windowaggregator/cmd/loadgen/gen"
)

// sink is an in-process OTLP gRPC receiver that counts what it gets.
type sink struct {
	mu       sync.Mutex
	spans    int64
	logs     int64
	points   int64
	requests int64
	kinds    map[string]int64
	series   map[string]bool
	first    chan struct{} // closed on the first request
	once     sync.Once
}

func (s *sink) countKind(attrs pcommon.Map) {
	v, _ := attrs.Get(gen.AttrKind)
	s.kinds[v.Str()]++
}

func (s *sink) traces(td ptrace.Traces) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.spans += int64(td.SpanCount())
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		svc, _ := rs.Resource().Attributes().Get(gen.AttrServiceName)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s.countKind(spans.At(k).Attributes())
				s.series[svc.Str()+" "+spans.At(k).Name()] = true
			}
		}
	}
	s.once.Do(func() { close(s.first) })
}

func (s *sink) logRecords(ld plog.Logs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.logs += int64(ld.LogRecordCount())
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		sls := ld.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				s.countKind(lrs.At(k).Attributes())
			}
		}
	}
	s.once.Do(func() { close(s.first) })
}

// awaitFirst waits for the sink's first request, for 3 s at the most.
func (s *sink) awaitFirst(t *testing.T) {
	t.Helper()
	select {
	case <-s.first:
	case <-time.After(3 * time.Second):
		t.Fatal("no request within 3s")
	}
}

type traceServer struct {
	ptraceotlp.UnimplementedGRPCServer
	s *sink
}

func (t *traceServer) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	t.s.traces(req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

type metricServer struct {
	pmetricotlp.UnimplementedGRPCServer
	s *sink
}

func (m *metricServer) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	m.s.mu.Lock()
	m.s.requests++
	m.s.points += int64(req.Metrics().DataPointCount())
	m.s.mu.Unlock()
	m.s.once.Do(func() { close(m.s.first) })
	return pmetricotlp.NewExportResponse(), nil
}

type logServer struct {
	plogotlp.UnimplementedGRPCServer
	s *sink
}

func (l *logServer) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	l.s.logRecords(req.Logs())
	return plogotlp.NewExportResponse(), nil
}

// startSink serves OTLP gRPC on a free loopback port and returns its address.
func startSink(t *testing.T) (*sink, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{kinds: map[string]int64{}, series: map[string]bool{}, first: make(chan struct{})}
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, &traceServer{s: s})
	plogotlp.RegisterGRPCServer(srv, &logServer{s: s})
	pmetricotlp.RegisterGRPCServer(srv, &metricServer{s: s})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return s, lis.Addr().String()
}

func mustParse(t *testing.T, args ...string) options {
	t.Helper()
	var errOut bytes.Buffer
	o, err := parseFlags(args, &errOut)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v\n%s", args, err, errOut.String())
	}
	return o
}

// mustRun runs the load generator with o to its end and returns its summary and what it wrote to
// stdout and stderr; an error from run fails the test.
func mustRun(t *testing.T, o options) (sum summary, out, errOut string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	sum, err := run(context.Background(), o, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	return sum, stdout.String(), stderr.String()
}

func TestSendsExpectedRecords(t *testing.T) {
	s, addr := startSink(t)
	const rate, batch, dur = 2000, 100, 600 * time.Millisecond
	o := mustParse(t, "-endpoint", addr, "-rate", "2000", "-batch", "100", "-duration", dur.String(),
		"-late", "0.2", "-too-late", "0.1", "-future", "0.05", "-invalid", "0.05", "-warm-up", "0", "-quiet")
	start := time.Now()
	sum, out, errOut := mustRun(t, o)
	elapsed := time.Since(start)
	if out != "" {
		t.Errorf("-quiet printed %q", out)
	}
	if elapsed > dur+2*time.Second {
		t.Errorf("run took %v for -duration %v", elapsed, dur)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// Every accepted request is on the server, and nothing else.
	if s.spans != sum.Spans || s.logs != sum.Logs || s.requests != sum.Requests {
		t.Fatalf("server got spans=%d logs=%d requests=%d, client reports %+v", s.spans, s.logs, s.requests, sum)
	}
	if sum.FailedRequests != 0 {
		t.Fatalf("%d failed requests: %s", sum.FailedRequests, errOut)
	}
	// Batch i is due at i·batch/rate from 0 on: rate·duration records plus at most one batch are
	// planned, and what the generator could not send in time it reports as skipped (under -race on a
	// busy machine that happens), so sent + skipped must match the plan closely. What was actually
	// received must be a good share of it unless the generator reported falling behind.
	expected := int64(rate * dur.Seconds())
	total := s.spans + s.logs
	t.Logf("received %d spans + %d logs in %d requests (about %d expected, %d skipped)",
		s.spans, s.logs, s.requests, expected, sum.Skipped)
	if planned := total + sum.Skipped; planned < expected-2*batch || planned > expected+batch {
		t.Fatalf("sent %d + skipped %d records, want about %d", total, sum.Skipped, expected)
	}
	if total > expected+batch || total < 2*batch {
		t.Fatalf("server received %d records, want about %d", total, expected)
	}
	if total < expected/2 {
		if sum.Skipped == 0 {
			t.Fatalf("server received %d records, want about %d", total, expected)
		}
		t.Logf("the machine was too slow for the rate: %d records skipped", sum.Skipped)
	}
	if total%batch != 0 {
		t.Errorf("received %d records, not whole batches of %d", total, batch)
	}
	// Batches alternate between spans and logs, spans first.
	if d := s.spans - s.logs; d < 0 || d > batch {
		t.Errorf("spans=%d logs=%d, want alternating batches", s.spans, s.logs)
	}
	for k := gen.OnTime; k < gen.NumKinds; k++ {
		if s.kinds[k.String()] != sum.Kinds[k] {
			t.Errorf("server got %d %v records, client counted %d", s.kinds[k.String()], k, sum.Kinds[k])
		}
	}
	// Without a warm-up, late records come from the first batch on: 20% of at least 200 records.
	if s.kinds[gen.Late.String()] == 0 {
		t.Errorf("no late records with -warm-up 0: %v", s.kinds)
	}
	if len(s.series) != 3*4 {
		t.Errorf("%d span series, want 12: %v", len(s.series), s.series)
	}
}

// TestWarmUpSendsOnTimeOnly runs within a warm-up longer than the run: the endpoint gets on-time
// records only, however large the other shares. (The warm-up's end, on an injected clock, is tested
// in package gen.)
func TestWarmUpSendsOnTimeOnly(t *testing.T) {
	s, addr := startSink(t)
	o := mustParse(t, "-endpoint", addr, "-rate", "2000", "-batch", "50", "-duration", "300ms",
		"-late", "0.4", "-too-late", "0.3", "-future", "0.1", "-invalid", "0.1", "-warm-up", "1h")
	sum, out, _ := mustRun(t, o)
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.spans + s.logs
	if total == 0 || s.kinds[gen.OnTime.String()] != total || sum.Kinds[gen.OnTime] != total {
		t.Fatalf("within the warm-up the server got kinds %v (%d records), client counted %v", s.kinds, total, sum.Kinds)
	}
	if !strings.Contains(out, "warm-up: on-time records only for the first 1h0m0s") {
		t.Errorf("no warm-up line in:\n%s", out)
	}
	if strings.Contains(out, "warm-up over") {
		t.Errorf("warm-up reported over within the hour:\n%s", out)
	}
}

func TestSpansOnlyAndSummaryLines(t *testing.T) {
	s, addr := startSink(t)
	o := mustParse(t, "-endpoint", addr, "-rate", "1000", "-batch", "20", "-duration", "400ms",
		"-signals", "spans")
	o.reportEvery = 100 * time.Millisecond
	sum, out, _ := mustRun(t, o)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs != 0 || sum.Logs != 0 || s.spans == 0 || s.spans != sum.Spans {
		t.Fatalf("server spans=%d logs=%d, client %+v", s.spans, s.logs, sum)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 { // header, at least one periodic line, the final line
		t.Fatalf("want a header, periodic and final summary lines, got:\n%s", out)
	}
	if !strings.HasPrefix(lines[0], "loadgen: sending spans to "+addr) {
		t.Errorf("header %q", lines[0])
	}
	last := lines[len(lines)-1]
	for _, want := range []string{"sent spans=", "logs=0", "on-time=", "late=", "too-late=", "future=", "invalid=", "errors=0", "skipped="} {
		if !strings.Contains(last, want) {
			t.Errorf("final line %q lacks %q", last, want)
		}
	}
	if last != sum.line() {
		t.Errorf("final line %q, want the returned summary %q", last, sum.line())
	}
}

func TestNothingAccepted(t *testing.T) {
	// A port that was free a moment ago: connections are refused.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()

	o := mustParse(t, "-endpoint", addr, "-rate", "400", "-batch", "20", "-duration", "200ms", "-quiet")
	var out, errOut bytes.Buffer
	sum, err := run(context.Background(), o, &out, &errOut)
	if !errors.Is(err, errNothingAccepted) {
		t.Fatalf("run error %v, want errNothingAccepted", err)
	}
	if sum.FailedRequests == 0 || sum.FailedRecords != sum.FailedRequests*20 || sum.Requests != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if got := strings.Count(errOut.String(), "export failed"); got != 1 {
		t.Errorf("want the failure reported once, got %d times:\n%s", got, errOut.String())
	}
	if code := realMain([]string{"-endpoint", addr, "-duration", "100ms", "-quiet"}, &out, &errOut); code != 1 {
		t.Errorf("realMain exit code %d, want 1", code)
	}
}

func TestStopsOnCancel(t *testing.T) {
	s, addr := startSink(t)
	o := mustParse(t, "-endpoint", addr, "-rate", "1000", "-batch", "10") // no -duration: runs until stopped
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut bytes.Buffer
	type result struct {
		sum summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := run(ctx, o, &out, &errOut)
		done <- result{sum, err}
	}()
	s.awaitFirst(t)
	time.Sleep(100 * time.Millisecond)
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("run did not stop within 3s of the cancel")
	}
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	s.mu.Lock()
	got := s.spans + s.logs
	s.mu.Unlock()
	if got == 0 || got != r.sum.Spans+r.sum.Logs {
		t.Fatalf("server got %d records, client reports %+v", got, r.sum)
	}
	if !strings.Contains(out.String(), "sent spans=") {
		t.Fatalf("no final summary:\n%s", out.String())
	}
}

// TestSignal sends the process SIGTERM while realMain runs, and expects a clean stop with a final
// summary. The signal goes out only after the first request arrived, that is after realMain has
// installed its handler, so it cannot kill the test binary.
func TestSignal(t *testing.T) {
	s, addr := startSink(t)
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- realMain([]string{"-endpoint", addr, "-rate", "1000", "-batch", "10"}, &out, &errOut)
	}()
	s.awaitFirst(t)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d, stderr:\n%s", code, errOut.String())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("realMain did not stop within 3s of SIGTERM")
	}
	if !strings.Contains(out.String(), "sent spans=") {
		t.Fatalf("no final summary:\n%s", out.String())
	}
}

func TestParseFlags(t *testing.T) {
	o := mustParse(t)
	if o.endpoint != "127.0.0.1:4317" || o.rate != 200 || o.batch != 50 || o.duration != 0 ||
		!o.spans || !o.logs || o.seed != 1 || o.quiet ||
		o.gen.Services != 3 || o.gen.Series != 4 || o.gen.OutOfOrder != 2*time.Second ||
		o.gen.Late != 0 || o.gen.LateBy != 20*time.Second || o.gen.TooLate != 0 ||
		o.gen.TooLateBy != 5*time.Minute || o.gen.Future != 0 || o.gen.FutureBy != time.Hour || o.gen.Invalid != 0 ||
		o.gen.WarmUp != 5*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	if got := o.interval(); got != 250*time.Millisecond {
		t.Errorf("interval %v, want 250ms", got)
	}
	if o := mustParse(t, "-signals", "logs"); o.spans || !o.logs {
		t.Errorf("-signals logs: %+v", o)
	}
	if o := mustParse(t, "-signals", "logs, spans"); !o.spans || !o.logs {
		t.Errorf("-signals logs,spans: %+v", o)
	}
	if o := mustParse(t, "-signals", "metrics", "-services", "5", "-pods", "3"); o.spans || o.logs || !o.metrics ||
		o.pods != (gen.PodsConfig{Services: 5, PodsPerService: 3, MaxRequests: 20}) || o.metricEvery != time.Second {
		t.Errorf("-signals metrics: %+v", o)
	}
	for _, args := range [][]string{
		{"-signals", "profiles"},
		{"-signals", ""},
		{"-signals", "metrics", "-pods", "0"},
		{"-signals", "metrics", "-pod-restart", "2"},
		{"-signals", "metrics", "-metric-interval", "0s"},
		{"-rate", "0"},
		{"-batch", "0"},
		{"-duration", "-1s"},
		{"-late", "1.5"},
		{"-late", "0.6", "-too-late", "0.6"},
		{"-invalid", "-0.1"},
		{"-warm-up", "-1s"},
		{"-services", "0"},
		{"-concurrency", "0"},
		{"stray"},
		{"-nosuchflag"},
	} {
		var errOut bytes.Buffer
		if _, err := parseFlags(args, &errOut); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	var out, errOut bytes.Buffer
	if code := realMain([]string{"-rate", "-3"}, &out, &errOut); code != 2 {
		t.Errorf("bad flag exit code %d, want 2", code)
	}
	if code := realMain([]string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-too-late-by") ||
		!strings.Contains(errOut.String(), "-warm-up") {
		t.Errorf("-h exit code %d, usage:\n%s", code, errOut.String())
	}
}

// With -signals metrics every pod exports its two points every -metric-interval: what the endpoint
// got is what the summary says, whole exports of 2 × services × pods points, and the final lines give
// each service's requests.
func TestSendsPodMetrics(t *testing.T) {
	s, addr := startSink(t)
	o := mustParse(t, "-endpoint", addr, "-signals", "metrics", "-services", "2", "-pods", "3", "-metric-interval", "20ms",
		"-duration", "300ms", "-pod-restart", "0.1")
	sum, out, _ := mustRun(t, o)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.points == 0 || s.points != sum.Points || s.points%12 != 0 || s.spans+s.logs != 0 {
		t.Fatalf("sink got %d points (%d spans, %d logs), summary says %d", s.points, s.spans, s.logs, sum.Points)
	}
	for _, svc := range []string{"svc-1", "svc-2"} {
		if !strings.Contains(out, "loadgen metrics: "+svc+" requests=") {
			t.Errorf("no totals for %s:\n%s", svc, out)
		}
	}
}
