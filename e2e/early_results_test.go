package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Early results into Prometheus, against the built distribution: one-minute windows with
// early_results: 20s, cumulative by remote write and scraped, and delta through delta_to_cumulative. Service a's
// spans at B+5, B+10, B+30, B+50; service w's at B+21 and B+41 move W past B+20 and B+40, and a span
// at B+62 closes the window: a's counter is one series with no reset, whose samples are at B+20,
// B+40 and B+60 with 2, 3 and 4 spans, by both remote-write paths; scraped, it reaches 4 with no
// reset either.
func TestEarlyResultsReachPrometheus(t *testing.T) {
	skipShort(t)
	recv, exporterPort := freePort(t), freePort(t)
	prom := startPrometheus(t, []string{loopback(exporterPort)})
	const connector = `
    window: {size: 1m, early_results: 20s}
    watermark: {max_out_of_orderness: 1s}
    aggregations: [{name: lat, signal: spans, group_by: [service.name], outputs: [count, avg]}]`
	config := chainConfig(recv, exporterPort, prom.remoteWriteURL(), connector, connector+"\n    temporality: delta")
	col, c := runCollector(t, recv, config)
	defer col.stop(t)

	// A window starting two minutes ago: its samples are within the queries' lookback.
	base := (time.Now().UnixNano()/(60*sec))*(60*sec) - 120*sec
	at := func(s float64) int64 { return base + int64(s*float64(sec)) }
	a := func(s float64) span { return span{"a", "/x", at(s), 5} }
	paths := []string{"remote_write", "delta_to_cumulative"}
	sampleAt := func(s float64) string { // the latest sample of each path at B+s, and its time
		return fmt.Sprintf(`lat_count_total{service_name="a", path!="scrape"} @ %.3f`, float64(at(s))/1e9)
	}
	waitValue := func(s, want float64) {
		t.Helper()
		q := sampleAt(s + 0.5)
		prom.waitQuery(t, 30*time.Second, q, func(got []promResult) error {
			if len(got) != len(paths) {
				return fmt.Errorf("%d series, want one per path", len(got))
			}
			for _, r := range got {
				if r.value != want {
					return fmt.Errorf("%s: %v at B+%v, want %v", r.labels["path"], r.value, s, want)
				}
			}
			return nil
		})
		ts := prom.mustQuery(t, fmt.Sprintf(`timestamp(%s)`, q))
		for _, r := range ts {
			if r.value != float64(at(s))/1e9 {
				t.Errorf("%s: the sample before B+%v+0.5 is stamped %v, want B+%v", r.labels["path"], s, r.value-float64(base)/1e9, s)
			}
		}
	}
	w := func(s float64) span { return span{"w", "/x", at(s), 5} }
	sendAll(t, c, spans(a(5), a(10)))
	sendAll(t, c, spans(w(21))) // W = B+20: the early result at B+20, of 2 spans
	waitValue(20, 2)
	sendAll(t, c, spans(a(30)))
	sendAll(t, c, spans(w(41))) // W = B+40: at B+40, 3 spans
	waitValue(40, 3)
	sendAll(t, c, spans(a(50)))
	sendAll(t, c, spans(span{"flush", "/x", at(62), 5})) // W = B+61: the window's end, 4 spans
	waitValue(60, 4)
	for _, path := range paths {
		sel := fmt.Sprintf(`{service_name="a", path=%q}[10m]`, path)
		if got := prom.mustQuery(t, "count_over_time(lat_count_total"+sel+")"); len(got) != 1 || got[0].value != 3 {
			t.Errorf("path %s: samples %v, want 3 (B+20, B+40, B+60)", path, got)
		}
		if err := allZero(prom.mustQuery(t, "resets(lat_count_total"+sel+")")); err != nil {
			t.Errorf("path %s: resets: %v", path, err)
		}
	}
	// Scraped: the exporter's latest value, sampled at scrape times.
	prom.waitQuery(t, 30*time.Second, `lat_count_total{service_name="a", path="scrape"}`, func(got []promResult) error {
		if len(got) != 1 || got[0].value != 4 {
			return fmt.Errorf("scraped %v, want 4", got)
		}
		return nil
	})
	if err := allZero(prom.mustQuery(t, `resets(lat_count_total{service_name="a", path="scrape"}[10m])`)); err != nil {
		t.Errorf("scraped: resets: %v", err)
	}
	for what, out := range map[string]string{"Prometheus": prom.output.String(), "the collector": col.output.String()} {
		for _, bad := range []string{"Out of order sample", "duplicate sample", "out of bounds", "Error appending remote write",
			"failed to send WriteRequest", "Exporting failed"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s logged %q", what, bad)
			}
		}
	}
}
