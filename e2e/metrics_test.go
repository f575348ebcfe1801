package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/windowaggregator/windowaggregator/cmd/loadgen/gen"
)

// metricsChainConfig is the distribution between an OTLP receiver on recv and Prometheus (the
// prometheus exporter on exporterPort, scraped, and remote write): the connector takes the pods'
// metrics (gen.Pods) and aggregates them by service, 2 s windows, allowed_lateness 6 s; the flush
// aggregation takes a gauge that moves the watermark.
func metricsChainConfig(recv, exporterPort int, remoteWrite string) string {
	return otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    window: {size: 2s}
    watermark: {max_out_of_orderness: 1s}
    allowed_lateness: 6s
    aggregations:
      - {name: reqs, signal: metrics, where: {metric_names: [%s]}, group_by: [service.name], outputs: [sum]}
      - {name: dur, signal: metrics, where: {metric_names: [%s]}, group_by: [service.name], outputs: [count, histogram],
         histogram: {explicit: {buckets: [10, 50, 100, 500]}}}
      - {name: flush, signal: metrics, where: {metric_names: [flush]}}
exporters:%s
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    metrics/in: {receivers: [otlp], exporters: [window_aggregator]}
    metrics/out: {receivers: [window_aggregator], exporters: [prometheus, prometheus_remote_write]}
`, gen.RequestsMetric, gen.DurationMetric, prometheusExporters(exporterPort, remoteWrite, ""))
}

// Pods of three services (three each) export a cumulative request counter and duration histogram
// over OTLP every second of event time, restarting now and then; the built distribution aggregates
// them by service, and Prometheus, by scrape and by remote write, holds for every service the
// requests the pods served after their first export (which, as they started before the collector,
// only set the bases), the histogram's count and buckets likewise, and no counter reset: a pod's
// restart is not a drop of its service's total.
func TestPrometheusSeesTruePerServiceTotalsFromPodMetrics(t *testing.T) {
	skipShort(t)
	recv, exporterPort := freePort(t), freePort(t)
	prom := startPrometheus(t, []string{loopback(exporterPort)})
	col, c := runCollector(t, recv, metricsChainConfig(recv, exporterPort, prom.remoteWriteURL()))
	prom.waitQuery(t, 30*time.Second, `up{job="windowaggregator"} == 1`, nonEmpty)
	send := func(md pmetric.Metrics) {
		t.Helper()
		if _, err := c.metrics.Export(context.Background(), pmetricotlp.NewExportRequestFromMetrics(md)); err != nil {
			t.Fatal(err)
		}
	}

	// Event times a minute in the past, from B on a 2 s boundary; the pods started 10 s before B.
	base := time.Unix(0, (time.Now().UnixNano()/(2*sec))*(2*sec)-60*sec)
	pods, err := gen.NewPods(gen.PodsConfig{Services: 3, PodsPerService: 3, MaxRequests: 30, Restart: 0.1},
		base.Add(-10*time.Second), rand.New(rand.NewPCG(29, 1)))
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]map[uint64]bool{} // by pod: the starts its points carried
	for k := range 20 {
		md := pods.Export(base.Add(time.Duration(k) * time.Second))
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			pod, _ := rm.Resource().Attributes().Get(gen.AttrPod)
			if starts[pod.Str()] == nil {
				starts[pod.Str()] = map[uint64]bool{}
			}
			starts[pod.Str()][uint64(rm.ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).StartTimestamp())] = true
		}
		send(md)
	}
	restarts := 0
	for _, s := range starts {
		restarts += len(s) - 1
	}
	if restarts == 0 {
		t.Fatal("no pod restarted: the test would not show that a restart is not a reset")
	}
	send(flushGauge(base.Add(25 * time.Second))) // W = B+24: every window of the pods' points fires
	wantEnd := float64(base.Add(20*time.Second).UnixNano()) / 1e9
	prom.waitQuery(t, 30*time.Second, `timestamp(reqs_sum_total{path="remote_write"})`, func(got []promResult) error {
		if len(got) != 3 {
			return fmt.Errorf("%d series, want 3", len(got))
		}
		for _, r := range got {
			if r.value < wantEnd-1e-3 {
				return fmt.Errorf("%s: latest point at %v, want %v", r.labels["service_name"], r.value, wantEnd)
			}
		}
		return nil
	})

	observed := pods.Observed()
	requests, buckets := map[string]float64{}, map[string]float64{}
	for svc, tot := range observed {
		requests[svc] = tot.Requests
		for i, le := range append(append([]float64(nil), gen.DurationBounds...), 0) {
			if i == len(gen.DurationBounds) {
				buckets[svc+" le=+Inf"] = tot.Buckets[i]
				continue
			}
			buckets[leKey(svc, le)] = tot.Buckets[i]
		}
	}
	const timeout = 30 * time.Second
	for _, path := range []string{"scrape", "remote_write"} {
		sel := fmt.Sprintf(`{path=%q}`, path)
		prom.waitQuery(t, timeout, "reqs_sum_total"+sel, equalBy(byService, requests))
		prom.waitQuery(t, timeout, "dur_count_total"+sel, equalBy(byService, requests))
		prom.waitQuery(t, timeout, "dur_histogram_milliseconds_count"+sel, equalBy(byService, requests))
		prom.waitQuery(t, timeout, "dur_histogram_milliseconds_bucket"+sel, equalBy(byServiceAndLe, buckets))
		for _, metric := range []string{"reqs_sum_total", "dur_count_total", "dur_histogram_milliseconds_count", "dur_histogram_milliseconds_bucket"} {
			if err := allZero(prom.mustQuery(t, fmt.Sprintf("resets(%s%s[10m])", metric, sel))); err != nil {
				t.Errorf("path %s: resets(%s): %v", path, metric, err)
			}
		}
	}
	for what, out := range map[string]string{"Prometheus": prom.output.String(), "the collector": col.output.String()} {
		for _, bad := range []string{"Out of order sample", "duplicate sample", "out of bounds", "Error appending remote write",
			"failed to send WriteRequest", "Exporting failed"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s logged %q", what, bad)
			}
		}
	}
	col.stop(t)
}

// flushGauge is one point of the gauge the flush aggregation takes, at t.
func flushGauge(t time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "flush")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("flush")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(t))
	dp.SetIntValue(1)
	return md
}
