package main

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// t0 is the start of the first window of these tests, and of the printer's clock.
var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// results builds a request of window results as the connector sends them: a metric per output.
type results struct{ md pmetric.Metrics }

func newResults() *results { return &results{md: pmetric.NewMetrics()} }

// metric appends a metric of one data point over [from, to) seconds after t0, with attributes
// attrs (key, value, ...).
func (r *results) metric(name, unit string, gauge bool, from, to float64, attrs []string) pmetric.NumberDataPoint {
	rm := r.md.ResourceMetrics().AppendEmpty()
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	var dp pmetric.NumberDataPoint
	if gauge {
		dp = m.SetEmptyGauge().DataPoints().AppendEmpty()
	} else {
		s := m.SetEmptySum()
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		dp = s.DataPoints().AppendEmpty()
	}
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(at(from)))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(at(to)))
	for i := 0; i+1 < len(attrs); i += 2 {
		dp.Attributes().PutStr(attrs[i], attrs[i+1])
	}
	return dp
}

func (r *results) count(name, unit string, from, to float64, n int64, attrs ...string) *results {
	r.metric(name, unit, false, from, to, attrs).SetIntValue(n)
	return r
}

func (r *results) sum(name, unit string, from, to, v float64, attrs ...string) *results {
	r.metric(name, unit, false, from, to, attrs).SetDoubleValue(v)
	return r
}

func (r *results) gauge(name, unit string, from, to, v float64, attrs ...string) *results {
	r.metric(name, unit, true, from, to, attrs).SetDoubleValue(v)
	return r
}

// durations adds the spans aggregation's outputs for one series: count, avg, p50, p95, p99, max.
func (r *results) durations(from, to float64, count int64, avg, p50, p95, p99, maxV float64, attrs ...string) *results {
	r.count("http.server.duration.count", "{span}", from, to, count, attrs...)
	for _, g := range []struct {
		out string
		v   float64
	}{{"avg", avg}, {"p50", p50}, {"p95", p95}, {"p99", p99}, {"max", maxV}} {
		r.gauge("http.server.duration."+g.out, "ms", from, to, g.v, attrs...)
	}
	return r
}

// output is what the printer has written so far, taken: each call returns what came since the last.
type output struct{ strings.Builder }

func (o *output) take() string {
	s := o.String()
	o.Reset()
	return s
}

func TestAWindowsFirstResultsArePrintedOnceSettled(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	// Spans svc-1 of 5, 15 and 40 ms: count 3, avg 20, p50 15 (nearest rank: the 2nd of 3), p95, p99
	// and max 40. svc-2 of 10 and 30 ms: count 2, avg 20, p50 10 (the 1st of 2), p95, p99, max 30.
	p.metrics(newResults().
		durations(0, 10, 3, 20, 15, 40, 40, 40, "service.name", "svc-1").
		durations(0, 10, 2, 20, 10, 30, 30, 30, "service.name", "svc-2").md, at(12))
	// The other signals' results of the same firing, in requests of their own, shortly after.
	p.metrics(newResults().count("log.volume.count", "{log}", 0, 10, 5).md, at(12.2))
	p.metrics(newResults().sum("http.server.requests.by_service.sum", "{request}", 0, 10, 312, "service.name", "svc-1").md, at(12.3))

	p.tick(at(13.2))
	if got := out.take(); got != "" {
		t.Fatalf("printed before the window's results settled:\n%s", got)
	}
	p.tick(at(13.3))
	want := "window 2026-12-07 10:00:00 to 10:00:10 UTC\n" +
		"  http.server.duration             service.name=svc-1 count=3 avg=20ms p50=15ms p95=40ms p99=40ms max=40ms\n" +
		"  http.server.duration             service.name=svc-2 count=2 avg=20ms p50=10ms p95=30ms p99=30ms max=30ms\n" +
		"  http.server.requests.by_service  service.name=svc-1 sum=312 requests\n" +
		"  log.volume                       (all)              count=5\n" +
		"late: none\n"
	if got := out.take(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	p.tick(at(20))
	if got := out.take(); got != "" {
		t.Errorf("a window printed twice, or a late line with nothing late:\n%s", got)
	}
}

// routedSpans is a request of routed spans: one per end time, with the reason.
func routedSpans(reason string, ends ...time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for _, end := range ends {
		s := spans.AppendEmpty()
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-time.Millisecond)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
		s.Attributes().PutStr(attrLateReason, reason)
	}
	return td
}

// routedLog is a request of one routed log, with a timestamp (zero: none), an observed one, and
// the reason.
func routedLog(reason string, ts, observed time.Time) plog.Logs {
	ld := plog.NewLogs()
	r := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	if !ts.IsZero() {
		r.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	}
	r.SetObservedTimestamp(pcommon.NewTimestampFromTime(observed))
	r.Attributes().PutStr(attrLateReason, reason)
	return ld
}

func TestLaterFiringsAndRoutedRecordsGoIntoTheLateLine(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	p.metrics(newResults().durations(0, 10, 3, 20, 15, 40, 40, 40, "service.name", "svc-1").
		count("log.volume.count", "{log}", 0, 10, 4).md, at(12))
	p.tick(at(13))
	out.take()

	// Two spans of 25 and 35 ms come late, within allowed_lateness: the window's slide is re-emitted
	// with their count alone, 2, and gauges of the whole window: avg (5+15+40+25+35)/5 = 24. A log too.
	p.metrics(newResults().durations(0, 10, 2, 24, 25, 40, 40, 40, "service.name", "svc-1").md, at(14))
	p.metrics(newResults().count("log.volume.count", "{log}", 0, 10, 1).md, at(14.5))
	// Routed past it: two spans ending 09:58:01.5 and 09:58:07.2, a log observed at 09:58:03 without
	// a timestamp, and a log stamped an hour ahead (future: not in the event times).
	p.traces(routedSpans("expired", at(-118.5), at(-112.8)))
	p.logs(routedLog("expired", time.Time{}, at(-117)))
	p.logs(routedLog("future", at(3600), at(15)))
	// The next window: svc-1 of 4 spans.
	p.metrics(newResults().durations(10, 20, 4, 30, 30, 50, 50, 50, "service.name", "svc-1").md, at(22))
	p.tick(at(23))
	want := "window 2026-12-07 10:00:10 to 10:00:20 UTC\n" +
		"  http.server.duration  service.name=svc-1 count=4 avg=30ms p50=30ms p95=50ms p99=50ms max=50ms\n" +
		"late: 2 spans, 1 log within allowed_lateness, into windows 10:00:00 UTC; " +
		"2 spans, 2 logs past it, routed, event time 09:58:01-09:58:07 UTC (1 future)\n"
	if got := out.take(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestALaterFiringBeforeTheWindowIsPrintedIsLate(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	p.metrics(newResults().count("log.volume.count", "{log}", 0, 10, 7).md, at(12))
	// A late log 0.5 s later, while the window waits to settle: its count is a later firing.
	p.metrics(newResults().count("log.volume.count", "{log}", 0, 10, 1).md, at(12.5))
	p.tick(at(13.5))
	want := "window 2026-12-07 10:00:00 to 10:00:10 UTC\n" +
		"  log.volume  (all) count=7\n" +
		"late: 1 log within allowed_lateness, into windows 10:00:00 UTC; none past it\n"
	if got := out.take(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestResultsOfAWindowAlreadyPrintedAreLate(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	p.metrics(newResults().count("log.volume.count", "{log}", 10, 20, 9).md, at(22))
	p.tick(at(23))
	// A series the window did not have when it was printed: its first result is a later firing; so is
	// that of an earlier window, which had no records when it fired.
	p.metrics(newResults().count("http.server.duration.count", "{span}", 10, 20, 2, "service.name", "svc-9").md, at(24))
	p.metrics(newResults().count("log.volume.count", "{log}", 0, 10, 3).md, at(25))
	p.metrics(newResults().count("log.volume.count", "{log}", 20, 30, 8).md, at(32))
	p.tick(at(33))
	want := "window 2026-12-07 10:00:10 to 10:00:20 UTC\n" +
		"  log.volume  (all) count=9\n" +
		"late: none\n" +
		"window 2026-12-07 10:00:20 to 10:00:30 UTC\n" +
		"  log.volume  (all) count=8\n" +
		"late: 2 spans, 3 logs within allowed_lateness, into windows 10:00:00, 10:00:10 UTC; none past it\n"
	if got := out.take(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestTheLateLineComesAloneEvery10sWithoutWindows(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	p.tick(at(10))
	if got := out.take(); got != "" {
		t.Fatalf("a late line with nothing late:\n%s", got)
	}
	p.traces(routedSpans("expired", at(-100), at(-99)))
	p.tick(at(19.9))
	if got := out.take(); got != "" {
		t.Fatalf("a late line before 10 s passed:\n%s", got)
	}
	p.tick(at(20))
	if got, want := out.take(), "late: none within allowed_lateness; 2 spans past it, routed, event time 09:58:20-09:58:21 UTC\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	p.tick(at(30))
	if got := out.take(); got != "" {
		t.Errorf("the same late records reported twice:\n%s", got)
	}
}

func TestFlushPrintsWhatWaits(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	p.metrics(newResults().count("log.volume.count", "{log}", 10, 20, 2).md, at(21))
	p.metrics(newResults().count("log.volume.count", "{log}", 0, 10, 6).md, at(21))
	p.flush(at(21.1))
	want := "window 2026-12-07 10:00:00 to 10:00:10 UTC\n" +
		"  log.volume  (all) count=6\n" +
		"window 2026-12-07 10:00:10 to 10:00:20 UTC\n" +
		"  log.volume  (all) count=2\n" +
		"late: none\n"
	if got := out.take(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	p.flush(at(22))
	if got := out.take(); got != "" {
		t.Errorf("flushed twice:\n%s", got)
	}
}

// Sliding windows: a delta count holds the slide [10 s, 20 s), the gauges the window [0 s, 20 s);
// both end together and share a line, under the window's bounds.
func TestSlideAndWindowShareALine(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	p.metrics(newResults().count("lat.count", "{span}", 10, 20, 4).gauge("lat.max", "s", 0, 20, 1.5).md, at(21))
	p.tick(at(22))
	want := "window 2026-12-07 10:00:00 to 10:00:20 UTC\n" +
		"  lat  (all) count=4 max=1.50s\n" +
		"late: none\n"
	if got := out.take(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// With 10 s windows, whose lines come every 10 s give or take the firing's jitter, the late line
// waits 15 s before it comes alone: it would race the next window's lines.
func TestTheLateLineAloneWaitsOneAndAHalfWindows(t *testing.T) {
	var out output
	p := newPrinter(&out, t0)
	p.metrics(newResults().count("log.volume.count", "{log}", 0, 10, 6).md, at(12))
	p.tick(at(13))
	out.take()
	p.logs(routedLog("expired", at(-100), at(13.5)))
	p.tick(at(23.5))
	if got := out.take(); got != "" {
		t.Fatalf("the late line alone 10.5 s after a 10 s window's lines:\n%s", got)
	}
	p.tick(at(28))
	if got, want := out.take(), "late: none within allowed_lateness; 1 log past it, routed, event time 09:58:20 UTC\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
