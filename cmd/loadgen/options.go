package main

import (
	"strings"
	"time"

	"github.com/windowaggregator/windowaggregator/cmd/loadgen/gen"
)

// options is the parsed command line.
type options struct {
	endpoint    string
	rate        float64 // records per second, all signals together
	batch       int     // records per request
	duration    time.Duration
	spans, logs bool
	metrics     bool          // pods' metrics, every metricInterval
	metricEvery time.Duration // -metric-interval
	pods        gen.PodsConfig
	seed        uint64
	quiet       bool
	timeout     time.Duration // per request
	concurrency int           // requests in flight at most
	reportEvery time.Duration // not a flag: 5 s, shorter in tests
	gen         gen.Config
}

// interval is the time between two batches that gives the requested rate.
func (o options) interval() time.Duration {
	return max(time.Duration(float64(o.batch)/o.rate*float64(time.Second)), time.Microsecond)
}

func (o options) signalNames() string {
	var s []string
	if o.spans {
		s = append(s, "spans")
	}
	if o.logs {
		s = append(s, "logs")
	}
	if o.metrics {
		s = append(s, "metrics")
	}
	return strings.Join(s, ",")
}
