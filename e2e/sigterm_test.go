package e2e

// SIGTERM while batch processors hold records in front of window_aggregator: a record that reaches a
// running instance before its Shutdown returns is aggregated and delivered or saved.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

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
