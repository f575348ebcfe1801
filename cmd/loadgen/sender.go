package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/windowaggregator/windowaggregator/cmd/loadgen/gen"
)

// errNothingAccepted is returned by run when not one request succeeded.
var errNothingAccepted = errors.New("the endpoint accepted no request")

// summary is what has been sent so far.
type summary struct {
	Spans, Logs    int64      // records in requests the endpoint accepted
	Points         int64      // metric data points in requests the endpoint accepted
	Kinds          gen.Counts // the same records by kind
	Rejected       int64      // records the endpoint reported as rejected in a partial success
	Requests       int64      // accepted requests
	FailedRequests int64      // requests that failed (never retried)
	FailedRecords  int64      // records in the failed requests
	Skipped        int64      // records never sent because the generator fell behind the rate
	Elapsed        time.Duration
}

func (s summary) line() string {
	var b strings.Builder
	secs := s.Elapsed.Seconds()
	fmt.Fprintf(&b, "loadgen %.1fs: sent spans=%d logs=%d points=%d (", secs, s.Spans, s.Logs, s.Points)
	for k := gen.OnTime; k < gen.NumKinds; k++ {
		if k > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, s.Kinds[k])
	}
	fmt.Fprintf(&b, ") rejected=%d errors=%d (records=%d) skipped=%d",
		s.Rejected, s.FailedRequests, s.FailedRecords, s.Skipped)
	if secs > 0 {
		fmt.Fprintf(&b, " rate=%.1f/s", float64(s.Spans+s.Logs)/secs)
	}
	return b.String()
}

// job is one export request, built by the main loop and sent by a worker.
type job struct {
	traces  ptrace.Traces   // set for spans
	logs    plog.Logs       // set for logs
	metrics pmetric.Metrics // set for metrics
	kind    jobKind
	n       int64
	counts  gen.Counts
}

// jobKind is what a job sends.
type jobKind uint8

const (
	sendSpans jobKind = iota
	sendLogs
	sendMetrics
)

// stats accumulates the outcome of the requests; workers write it, the main loop reads it.
type stats struct {
	mu         sync.Mutex
	sum        summary
	seenErrors map[string]bool
	errOut     io.Writer
}

func (s *stats) ok(j job, rejected int64, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sum.Requests++
	switch j.kind {
	case sendMetrics:
		s.sum.Points += j.n
	case sendSpans:
		s.sum.Spans += j.n
	default:
		s.sum.Logs += j.n
	}
	s.sum.Kinds.Add(j.counts)
	s.sum.Rejected += rejected
	if rejected > 0 && msg != "" {
		s.reportOnce("partial success: " + msg)
	}
}

func (s *stats) failed(j job, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sum.FailedRequests++
	s.sum.FailedRecords += j.n
	key := err.Error()
	if st, ok := status.FromError(err); ok {
		key = st.Code().String() + ": " + st.Message()
	}
	s.reportOnce("export failed: " + key)
}

// reportOnce prints each distinct problem once, so that a dead endpoint does not flood the
// terminal. Called with mu held.
func (s *stats) reportOnce(msg string) {
	if s.seenErrors == nil {
		s.seenErrors = map[string]bool{}
	}
	if s.seenErrors[msg] || len(s.seenErrors) >= 20 {
		return
	}
	s.seenErrors[msg] = true
	fmt.Fprintln(s.errOut, "loadgen:", msg)
}

func (s *stats) skipped(records int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sum.Skipped += records
}

func (s *stats) snapshot(elapsed time.Duration) summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := s.sum
	sum.Elapsed = elapsed
	return sum
}

// exporter sends one job; it is safe for concurrent use.
type exporter struct {
	traces  ptraceotlp.GRPCClient
	logs    plogotlp.GRPCClient
	metrics pmetricotlp.GRPCClient
	timeout time.Duration
}

func (e exporter) send(j job, st *stats) {
	// Requests in flight finish (or time out) even after a stop, so that what the summary calls
	// sent is what the endpoint accepted.
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	var rejected int64
	var message string
	var err error
	switch j.kind {
	case sendMetrics:
		var resp pmetricotlp.ExportResponse
		if resp, err = e.metrics.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(j.metrics)); err == nil {
			rejected, message = resp.PartialSuccess().RejectedDataPoints(), resp.PartialSuccess().ErrorMessage()
		}
	case sendSpans:
		var resp ptraceotlp.ExportResponse
		if resp, err = e.traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(j.traces)); err == nil {
			rejected, message = resp.PartialSuccess().RejectedSpans(), resp.PartialSuccess().ErrorMessage()
		}
	default:
		var resp plogotlp.ExportResponse
		if resp, err = e.logs.Export(ctx, plogotlp.NewExportRequestFromLogs(j.logs)); err == nil {
			rejected, message = resp.PartialSuccess().RejectedLogRecords(), resp.PartialSuccess().ErrorMessage()
		}
	}
	if err != nil {
		st.failed(j, err)
		return
	}
	st.ok(j, rejected, message)
}

// waitConnected dials the endpoint and waits until the connection is ready, fails once, ctx is
// done or timeout has passed, so that the rate's clock does not start with a handshake. An endpoint
// that is down is no error here: the requests will fail and be counted.
func waitConnected(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn.Connect()
	for {
		state := conn.GetState()
		if state == connectivity.Ready || state == connectivity.TransientFailure || state == connectivity.Shutdown {
			return
		}
		if !conn.WaitForStateChange(ctx, state) {
			return
		}
	}
}

// run sends batches until ctx is done or o.duration has passed, then waits for the requests in
// flight and prints the final summary. It returns errNothingAccepted when no request succeeded.
func run(ctx context.Context, o options, out, errOut io.Writer) (summary, error) {
	g, err := gen.New(o.gen, rand.New(rand.NewPCG(o.seed, o.seed^0x5851f42d4c957f2d)))
	if err != nil {
		return summary{}, err
	}
	conn, err := grpc.NewClient(o.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return summary{}, fmt.Errorf("endpoint %q: %w", o.endpoint, err)
	}
	defer conn.Close()
	interval := o.interval()
	records := o.spans || o.logs
	var pods *gen.Pods
	if o.metrics {
		if pods, err = gen.NewPods(o.pods, time.Now(), rand.New(rand.NewPCG(o.seed, o.seed^0x2545f4914f6cdd1d))); err != nil {
			return summary{}, err
		}
	}
	if !o.quiet {
		fmt.Fprintf(out, "loadgen: sending %s to %s", o.signalNames(), o.endpoint)
		if records {
			fmt.Fprintf(out, ": %g records/s in batches of %d (one every %v), %d services × %d series",
				o.rate, o.batch, interval, o.gen.Services, o.gen.Series)
		}
		if o.metrics {
			fmt.Fprintf(out, "; metrics of %d services × %d pods every %v", o.pods.Services, o.pods.PodsPerService, o.metricEvery)
		}
		fmt.Fprintf(out, ", seed %d\n", o.seed)
	}
	// warm is true until the first batch past the warm-up has been built; its end is reported if
	// there are other records than on-time ones to mix in.
	warm := o.gen.WarmUp > 0
	mixed := o.gen.Late+o.gen.TooLate+o.gen.Future+o.gen.Invalid > 0
	if warm && mixed && !o.quiet {
		fmt.Fprintf(out, "loadgen: warm-up: on-time records only for the first %v\n", o.gen.WarmUp)
	}
	waitConnected(ctx, conn, o.timeout)
	exp := exporter{
		traces:  ptraceotlp.NewGRPCClient(conn),
		logs:    plogotlp.NewGRPCClient(conn),
		metrics: pmetricotlp.NewGRPCClient(conn),
		timeout: o.timeout,
	}

	st := &stats{errOut: errOut}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			for j := range jobs {
				exp.send(j, st)
			}
		})
	}

	tick := time.NewTicker(interval)
	defer tick.Stop()
	report := time.NewTicker(o.reportEvery)
	defer report.Stop()
	start := time.Now()
	if o.duration > 0 { // the clock starts once connected
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(o.duration))
		defer cancel()
	}
	printReport := func() {
		if !o.quiet {
			fmt.Fprintln(out, st.snapshot(time.Since(start)).line())
		}
	}

	var metricTicks <-chan time.Time // nil without metrics: never ready
	if o.metrics {
		mt := time.NewTicker(o.metricEvery)
		defer mt.Stop()
		metricTicks = mt.C
	}
	// hand gives job j to a worker; while all of them are busy it waits, still printing the summary
	// lines. It is false once ctx is done.
	hand := func(j job) bool {
		for {
			select {
			case jobs <- j:
				return true
			case <-report.C:
				printReport()
			case <-ctx.Done():
				return false
			}
		}
	}
	nextSpans := o.spans // with both signals, batches alternate, spans first
	// dispatch builds the next batch of records and hands it to a worker.
	dispatch := func() bool {
		if ctx.Err() != nil {
			return false
		}
		j := job{kind: sendLogs, n: int64(o.batch)}
		if nextSpans {
			j.kind = sendSpans
		}
		now := time.Now()
		if j.kind == sendSpans {
			j.traces, j.counts = g.Spans(now, o.batch)
		} else {
			j.logs, j.counts = g.Logs(now, o.batch)
		}
		if o.spans && o.logs {
			nextSpans = !nextSpans
		}
		if warm && !g.WarmingUp(now) {
			warm = false
			if mixed && !o.quiet {
				fmt.Fprintf(out, "loadgen %.1fs: warm-up over: records of every configured kind from now on\n",
					now.Sub(start).Seconds())
			}
		}
		return hand(j)
	}
	exportPods := func(now time.Time) bool {
		return ctx.Err() == nil && hand(job{kind: sendMetrics, metrics: pods.Export(now), n: int64(pods.Points())})
	}

	// Batch i is due at start + i·interval. A tick sends every batch that is due, so that a tick
	// the ticker dropped while the machine or the endpoint was slow is made up for; but the backlog
	// is capped, and what a longer stall leaves over is skipped rather than sent in a burst.
	maxBacklog := int64(o.concurrency)
	var dispatched int64
	dueBy := func(t time.Time) int64 { return int64(t.Sub(start)/interval) + 1 }
	catchUp := func(now time.Time) bool {
		if !records {
			return ctx.Err() == nil
		}
		due := dueBy(now)
		if behind := due - dispatched - maxBacklog; behind > 0 {
			st.skipped(behind * int64(o.batch))
			dispatched += behind
		}
		for ; dispatched < due; dispatched++ {
			if !dispatch() {
				return false
			}
		}
		return true
	}

	running := catchUp(start)
	if o.metrics && running {
		running = exportPods(start)
	}
	for running {
		select {
		case <-ctx.Done():
			running = false
		case now := <-tick.C:
			running = catchUp(now)
		case now := <-metricTicks:
			running = exportPods(now)
		case <-report.C:
			printReport()
		}
	}
	// Batches that fell due while the loop was stuck waiting for a worker were skipped too; the one
	// that fell due in the last interval is not counted, as its tick may simply not have come yet.
	stop := time.Now()
	if end := start.Add(o.duration); o.duration > 0 && stop.After(end) {
		stop = end
	}
	if behind := dueBy(stop) - dispatched - 1; records && behind > 0 {
		st.skipped(behind * int64(o.batch))
	}
	close(jobs)
	wg.Wait()

	final := st.snapshot(time.Since(start))
	if !o.quiet {
		fmt.Fprintln(out, final.line())
		if pods != nil {
			printPods(out, pods)
		}
	}
	if final.Requests == 0 {
		return final, fmt.Errorf("%w at %s (%d failed)", errNothingAccepted, o.endpoint, final.FailedRequests)
	}
	return final, nil
}

// printPods prints, by service, the requests the pods served after their first export (what a
// collector started before loadgen counts less the first points, which only set bases) and in all.
func printPods(out io.Writer, pods *gen.Pods) {
	observed, served := pods.Observed(), pods.Served()
	services := make([]string, 0, len(served))
	for svc := range served {
		services = append(services, svc)
	}
	sort.Strings(services)
	for _, svc := range services {
		fmt.Fprintf(out, "loadgen metrics: %s requests=%g after each pod's first export (%g in all), duration sum=%g ms (%g)\n",
			svc, observed[svc].Requests, served[svc].Requests, observed[svc].DurationSum, served[svc].DurationSum)
	}
}
