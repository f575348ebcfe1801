// Command windowprint prints window_aggregator's results in a terminal, for the demo (make demo): an
// OTLP/gRPC server (no TLS) that takes the window results, as metrics, and the late spans and logs
// that the connector routes, and prints to stdout
//
//   - for each window, at its first firing: a header with its bounds in UTC, and a line per
//     aggregation and series with its outputs' values and units (count=155 avg=62.3ms p99=240ms);
//   - after each window's lines: a line of what came late since the previous one: the records that
//     later firings of windows already printed added (their counts), into which windows, and the
//     records routed past allowed_lateness, with their event times; on its own while no window's
//     lines come, every 10 s or one and a half windows, whichever is longer.
//
// It reads the points of delta temporality with late_firings: revise: a window's first firing holds
// its records, a later one (the same window re-emitted) the late records alone. It takes the first
// results it receives of a window for its first firing: it is to listen before the collector starts.
// A window that had no records by its first firing has none: its first results come with late
// records alone, and are printed as a window's unless a later window has been printed already (the
// demo's load generator sends on-time records only until that is so). It exits on SIGTERM, or
// SIGINT unless started with SIGINT ignored (in the background of a script, which stops it once the
// collector has sent its last results), printing what is waiting.
//
//	go run ./cmd/windowprint -listen 127.0.0.1:4320
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// tickEvery is how often the printer looks for windows to print.
const tickEvery = 100 * time.Millisecond

// realMain is main without os.Exit; stop ends it as a signal would. It returns 0 on a clean stop, 1
// when it cannot listen, 2 on bad flags.
func realMain(args []string, stdout, stderr io.Writer, stop <-chan os.Signal) int {
	fs := flag.NewFlagSet("windowprint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:4320", "OTLP/gRPC `host:port` to listen on, without TLS")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "windowprint: unexpected arguments: %q\n", fs.Args())
		return 2
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "windowprint:", err)
		return 1
	}
	s := newServer(newPrinter(stdout, time.Now()), time.Now)
	served := make(chan error, 1)
	go func() { served <- s.serve(lis) }()
	fmt.Fprintf(stderr, "windowprint: listening on %s\n", lis.Addr())
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.tick()
		case <-stop:
			s.stop(5 * time.Second)
			return 0
		case err := <-served:
			fmt.Fprintln(stderr, "windowprint:", err)
			return 1
		}
	}
}

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	if !signal.Ignored(os.Interrupt) {
		signal.Notify(stop, os.Interrupt)
	}
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr, stop))
}
