// Command loadgen sends OTLP spans, logs and metrics over gRPC to a collector, to demo and load-test
// the windowaggregator component: it stamps records with event times around "now", with a chosen
// share of late, too-late, future and timestamp-less records, so that the watermark, the allowed
// lateness and the late-data pipeline all get exercised; and it simulates pods that export cumulative
// metrics (a request counter and a duration histogram) every -metric-interval, restarting now and
// then, for the metrics input.
//
// For the first -warm-up (5 s) every record is on time: a freshly started collector has no
// watermark, so it would take late records in its first batches for on-time ones; the warm-up lets
// those batches set the watermark from now before the first late record arrives.
//
//	go run ./cmd/loadgen -rate 500 -late 0.05 -too-late 0.02 -duration 1m
//
// Every record carries the attribute loadgen.kind (on-time, late, too-late, future or invalid),
// so the collector's output can be checked against what was meant.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func parseSignals(v string) (spans, logs, metrics bool, err error) {
	for _, s := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "spans", "traces":
			spans = true
		case "logs":
			logs = true
		case "metrics":
			metrics = true
		default:
			return false, false, false, fmt.Errorf("-signals: unknown signal %q (want spans, logs, metrics, or a list of them)", s)
		}
	}
	return spans, logs, metrics, nil
}

// parseFlags parses args (without the program name). Usage and errors go to errOut.
func parseFlags(args []string, errOut io.Writer) (options, error) {
	o := options{reportEvery: 5 * time.Second}
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "Usage: loadgen [flags]\n\n"+
			"Sends OTLP spans and logs over gRPC (insecure) with event times around now, some of them\n"+
			"late, too late, in the future or without a timestamp (after a -warm-up of on-time records only);\n"+
			"and, with -signals metrics, the metrics of simulated pods (-pods per service).\n"+
			"Stops on SIGINT/SIGTERM or after -duration.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.endpoint, "endpoint", "127.0.0.1:4317", "OTLP gRPC `host:port` of the collector (no TLS)")
	fs.Float64Var(&o.rate, "rate", 200, "records per second, spans and logs together")
	fs.IntVar(&o.batch, "batch", 50, "records per request")
	fs.DurationVar(&o.duration, "duration", 0, "how long to run; 0 runs until SIGINT/SIGTERM")
	signals := fs.String("signals", "spans,logs", "what to send: a list of spans, logs, metrics")
	fs.IntVar(&o.gen.Services, "services", 3, "distinct service.name values (svc-1 … svc-N)")
	fs.IntVar(&o.gen.Series, "series", 4, "distinct span names per service")
	fs.DurationVar(&o.gen.OutOfOrder, "out-of-order", 2*time.Second,
		"event times are now minus a uniform jitter in [0, this)")
	// The warm-up's default is a few seconds: at the default rate that is 20 batches, enough for the
	// first ones to have set a fresh collector's watermark before the first late record is built.
	fs.DurationVar(&o.gen.WarmUp, "warm-up", 5*time.Second,
		"send only on-time records for this long from the first batch, so that a freshly started\n"+
			"collector sets its watermark from now before any late, too-late, future or invalid record\n"+
			"arrives (its first batches are judged against no watermark: all on time); 0 for none")
	fs.IntVar(&o.pods.PodsPerService, "pods", 2, "metrics: simulated pods per service")
	fs.IntVar(&o.pods.MaxRequests, "pod-requests", 20, "metrics: requests a pod serves between two exports, at most")
	fs.Float64Var(&o.pods.Restart, "pod-restart", 0, "metrics: probability (0..1) that a pod restarts before an export")
	fs.DurationVar(&o.metricEvery, "metric-interval", time.Second, "metrics: how often every pod exports")
	fs.Float64Var(&o.gen.Late, "late", 0, "share (0..1) of records stamped -late-by in the past, within allowed lateness")
	fs.DurationVar(&o.gen.LateBy, "late-by", 20*time.Second, "how far in the past -late records are stamped")
	fs.Float64Var(&o.gen.TooLate, "too-late", 0,
		"share (0..1) of records stamped -too-late-by in the past, beyond allowed lateness")
	fs.DurationVar(&o.gen.TooLateBy, "too-late-by", 5*time.Minute, "how far in the past -too-late records are stamped")
	fs.Float64Var(&o.gen.Future, "future", 0, "share (0..1) of records stamped -future-by in the future")
	fs.DurationVar(&o.gen.FutureBy, "future-by", time.Hour, "how far in the future -future records are stamped")
	fs.Float64Var(&o.gen.Invalid, "invalid", 0, "share (0..1) of records without any timestamp")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed: the same seed gives the same records")
	fs.BoolVar(&o.quiet, "quiet", false, "print no summary lines")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "deadline of each export request, and how long to wait for the first connection")
	fs.IntVar(&o.concurrency, "concurrency", 4, "export requests in flight at most")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if o.spans, o.logs, o.metrics, err = parseSignals(*signals); err != nil {
		return o, err
	}
	o.pods.Services = o.gen.Services
	var errs []error
	if !(o.rate > 0) {
		errs = append(errs, fmt.Errorf("-rate must be positive, got %v", o.rate))
	}
	if o.batch < 1 {
		errs = append(errs, fmt.Errorf("-batch must be at least 1, got %d", o.batch))
	}
	if o.duration < 0 {
		errs = append(errs, fmt.Errorf("-duration must not be negative, got %v", o.duration))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout must be positive, got %v", o.timeout))
	}
	if o.concurrency < 1 {
		errs = append(errs, fmt.Errorf("-concurrency must be at least 1, got %d", o.concurrency))
	}
	if err := o.gen.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.metrics {
		if err := o.pods.Validate(); err != nil {
			errs = append(errs, err)
		}
		if o.metricEvery <= 0 {
			errs = append(errs, fmt.Errorf("-metric-interval must be positive, got %v", o.metricEvery))
		}
	}
	return o, errors.Join(errs...)
}

// realMain is main without os.Exit: it returns 0 on a clean stop, 1 when the endpoint accepted
// nothing, 2 on bad flags.
func realMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, restore the default handling so that a second one kills.
		<-ctx.Done()
		stop()
	}()
	if _, err := run(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	return 0
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}
