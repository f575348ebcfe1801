package bench

// Metric points in: window_aggregator's metrics input side by side with VictoriaMetrics' stream
// aggregation (lib/streamaggr), the reference for the job, and contrib's metricstransform processor
// (aggregate_labels), the collector's nearest: each fed the same samples in its own input format,
// with the same label reduction (pod away, service and route kept) and the same outputs.

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/prompb"
	"github.com/VictoriaMetrics/VictoriaMetrics/lib/streamaggr"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/metricstransformprocessor"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	windowaggregator "github.com/windowaggregator/windowaggregator"
)

// The metrics workload: 10 services × 20 pods × 5 routes, 1000 input series, which the aggregations
// reduce to 50 (service, route). One scrape is every series' sample at one time, a second of event
// time after the previous scrape: a counter's running total, a gauge's value, or a histogram of
// metricBounds (cumulative). A pod's points are its own resource in pdata (service.name and
// k8s.pod.name on it, http.route on the point); in VictoriaMetrics' input a series' labels are its
// name, service, pod and route, a histogram's buckets (le, +Inf included), count and sum series of
// their own, as Prometheus writes them.
const (
	metricServices = 10
	metricPods     = 20 // per service
	metricRoutes   = 5
	metricSeries   = metricServices * metricPods * metricRoutes
)

var metricBounds = []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000}

// metricKind is one of the workload's kinds of input.
type metricKind string

const (
	kindCounter   metricKind = "counter"
	kindGauge     metricKind = "gauge"
	kindHistogram metricKind = "histogram"
)

// metricScrape is one scrape in each side's format.
type metricScrape struct {
	pd  pmetric.Metrics
	vm  []prompb.TimeSeries
	pts int // data points (pdata's), each one or, for a histogram, len(metricBounds)+3 series of VictoriaMetrics'
}

// scrapeBuilder builds the scrapes of one kind: scrape k is at start + k s. A series' counter grows
// by 1 to 20 a second, its gauge is its route's level plus noise, its histogram takes 1 to 20
// observations a second.
type scrapeBuilder struct {
	kind     metricKind
	start    time.Time
	counters []float64
	buckets  [][]uint64
	sums     []float64
	labels   [][]prompb.Label // by series, without the name
}

func newScrapeBuilder(kind metricKind, start time.Time) *scrapeBuilder {
	sb := &scrapeBuilder{kind: kind, start: start, counters: make([]float64, metricSeries), sums: make([]float64, metricSeries),
		buckets: make([][]uint64, metricSeries)}
	for i := range metricSeries {
		svc, pod, route := seriesLabels(i)
		sb.labels = append(sb.labels, []prompb.Label{{Name: "service", Value: svc}, {Name: "pod", Value: pod}, {Name: "route", Value: route}})
		sb.buckets[i] = make([]uint64, len(metricBounds)+1)
	}
	return sb
}

func seriesLabels(i int) (service, pod, route string) {
	s, p, r := i/(metricPods*metricRoutes), i/metricRoutes%metricPods, i%metricRoutes
	return "svc-" + strconv.Itoa(s), "svc-" + strconv.Itoa(s) + "-pod-" + strconv.Itoa(p), "/api/" + strconv.Itoa(r)
}

// next builds scrape k.
func (sb *scrapeBuilder) next(k int) metricScrape {
	t := sb.start.Add(time.Duration(k) * time.Second)
	ts, ms := pcommon.NewTimestampFromTime(t), t.UnixMilli()
	start := pcommon.NewTimestampFromTime(sb.start.Add(-time.Hour))
	var sc metricScrape
	sc.pd = pmetric.NewMetrics()
	var ms1 pmetric.MetricSlice
	for i := range metricSeries {
		svc, pod, route := seriesLabels(i)
		if i%metricRoutes == 0 { // a pod's resource
			rm := sc.pd.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("service.name", svc)
			rm.Resource().Attributes().PutStr("k8s.pod.name", pod)
			m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			ms1 = rm.ScopeMetrics().At(0).Metrics()
			switch sb.kind {
			case kindCounter:
				m.SetName("requests")
				s := m.SetEmptySum()
				s.SetIsMonotonic(true)
				s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			case kindGauge:
				m.SetName("queue_depth")
				m.SetEmptyGauge()
			case kindHistogram:
				m.SetName("duration")
				m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			}
		}
		m := ms1.At(0)
		n := uint64(1 + (i*7+k*13)%20) // what the series adds this second
		sc.pts++
		switch sb.kind {
		case kindCounter:
			sb.counters[i] += float64(n)
			dp := m.Sum().DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(sb.counters[i])
			dp.Attributes().PutStr("http.route", route)
			sc.vm = append(sc.vm, vmSeries("requests_total", sb.labels[i], sb.counters[i], ms))
		case kindGauge:
			v := float64(10*(i%metricRoutes) + int(n))
			dp := m.Gauge().DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(v)
			dp.Attributes().PutStr("http.route", route)
			sc.vm = append(sc.vm, vmSeries("queue_depth", sb.labels[i], v, ms))
		case kindHistogram:
			var count uint64
			for j := range n {
				v := float64(1 + (uint64(i)*31+uint64(k)*17+j*101)%3000)
				b := 0
				for b < len(metricBounds) && v > metricBounds[b] {
					b++
				}
				sb.buckets[i][b]++
				sb.sums[i] += v
			}
			for _, c := range sb.buckets[i] {
				count += c
			}
			dp := m.Histogram().DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetCount(count)
			dp.SetSum(sb.sums[i])
			dp.ExplicitBounds().FromRaw(metricBounds)
			dp.BucketCounts().FromRaw(sb.buckets[i])
			dp.Attributes().PutStr("http.route", route)
			var le uint64
			for b, c := range sb.buckets[i] {
				le += c
				bound := "+Inf"
				if b < len(metricBounds) {
					bound = strconv.FormatFloat(metricBounds[b], 'g', -1, 64)
				}
				sc.vm = append(sc.vm, vmSeries("duration_bucket", append(sb.labels[i][:3:3], prompb.Label{Name: "le", Value: bound}), float64(le), ms))
			}
			sc.vm = append(sc.vm, vmSeries("duration_count", sb.labels[i], float64(count), ms), vmSeries("duration_sum", sb.labels[i], sb.sums[i], ms))
		}
	}
	return sc
}

func vmSeries(name string, labels []prompb.Label, v float64, ms int64) prompb.TimeSeries {
	return prompb.TimeSeries{Labels: append([]prompb.Label{{Name: "__name__", Value: name}}, labels...), Samples: []prompb.Sample{{Value: v, Timestamp: ms}}}
}

// metricSide is one implementation fed the scrapes.
type metricSide struct {
	name    string
	consume func(sc *metricScrape)
	stop    func()
	// clone: it changes its input (metricstransform), so that it gets a copy, made untimed
	clone   bool
	elapsed time.Duration
	mallocs uint64
}

func newWindowAggregatorMetrics(b testing.TB, kind metricKind, out *consumertest.MetricsSink) *metricSide {
	cfg := windowaggregator.NewConnectorFactory().CreateDefaultConfig().(*windowaggregator.Config)
	cfg.Window.Size = time.Minute
	cfg.Emit.Interval = time.Hour
	cfg.Watermark.MaxFutureSkew = time.Minute
	if os.Getenv("BENCH_DEDUP") == "off" {
		cfg.Dedup.Enabled = false
	}
	a := windowaggregator.AggregationConfig{Name: string(kind), Signal: "metrics",
		GroupBy: []windowaggregator.GroupByKey{{Key: "service.name"}, {Key: "http.route"}}}
	switch kind {
	case kindCounter:
		a.Where, a.Outputs = &windowaggregator.WhereConfig{MetricNames: []string{"requests"}}, []string{"sum"}
	case kindGauge:
		a.Where, a.Outputs = &windowaggregator.WhereConfig{MetricNames: []string{"queue_depth"}}, []string{"avg", "max"}
	case kindHistogram:
		buckets := make([]any, len(metricBounds))
		for i, v := range metricBounds {
			buckets[i] = v
		}
		a.Where, a.Outputs = &windowaggregator.WhereConfig{MetricNames: []string{"duration"}}, []string{"histogram"}
		a.Histogram = &windowaggregator.HistogramConfig{Explicit: &windowaggregator.ExplicitHistogramConfig{Buckets: buckets}}
	}
	cfg.Aggregations = []windowaggregator.AggregationConfig{a}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	set := connectortest.NewNopSettings(windowaggregator.Type)
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	c, err := windowaggregator.NewConnectorFactory().CreateMetricsToMetrics(context.Background(), set, cfg, out)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	return &metricSide{name: "window_aggregator",
		consume: func(sc *metricScrape) {
			if err := c.ConsumeMetrics(context.Background(), sc.pd); err != nil {
				b.Fatal(err)
			}
		},
		stop: func() { _ = c.Shutdown(context.Background()) }}
}

func newVictoriaMetrics(b testing.TB, kind metricKind, push streamaggr.PushFunc, opts *streamaggr.Options) *metricSide {
	var cfg string
	switch kind {
	case kindCounter:
		cfg = `[{match: 'requests_total', interval: 1m, no_align_flush_to_interval: true, by: [service, route], outputs: [increase]}]`
	case kindGauge:
		cfg = `[{match: 'queue_depth', interval: 1m, no_align_flush_to_interval: true, by: [service, route], outputs: [avg, max]}]`
	case kindHistogram:
		cfg = `[{match: '{__name__=~"duration_(bucket|count|sum)"}', interval: 1m, no_align_flush_to_interval: true, by: [service, route, le], outputs: [increase]}]`
	}
	a, err := streamaggr.LoadFromData([]byte(cfg), push, opts, "bench")
	if err != nil {
		b.Fatal(err)
	}
	var idx []uint32
	return &metricSide{name: "victoriametrics",
		consume: func(sc *metricScrape) { idx = a.Push(sc.vm, idx) },
		stop:    a.MustStop}
}

func newMetricsTransform(b *testing.B, kind metricKind) *metricSide {
	f := metricstransformprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	op := func(metric, aggregation, action, newName string) map[string]any {
		t := map[string]any{"include": metric, "action": action,
			"operations": []any{map[string]any{"action": "aggregate_labels", "label_set": []any{"http.route"}, "aggregation_type": aggregation}}}
		if newName != "" {
			t["new_name"] = newName
		}
		return t
	}
	var transforms []any
	switch kind {
	case kindCounter:
		transforms = []any{op("requests", "sum", "update", "")}
	case kindGauge:
		transforms = []any{op("queue_depth", "max", "insert", "queue_depth.max"), op("queue_depth", "mean", "update", "")}
	case kindHistogram:
		transforms = []any{op("duration", "sum", "update", "")}
	}
	if err := confmap.NewFromStringMap(map[string]any{"transforms": transforms}).Unmarshal(cfg); err != nil {
		b.Fatal(err)
	}
	set := processortest.NewNopSettings(f.Type())
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	p, err := f.CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	return &metricSide{name: "metricstransform", clone: true,
		consume: func(sc *metricScrape) {
			if err := p.ConsumeMetrics(context.Background(), sc.pd); err != nil {
				b.Fatal(err)
			}
		},
		stop: func() { _ = p.Shutdown(context.Background()) }}
}

// BenchmarkMetricsIn feeds each kind's scrapes to the three sides turn by turn (the side that goes
// first rotates), timing each side on its own: b.N scrapes of 1000 points to each. ns/op means
// little (it includes building the scrapes); read the custom metrics: <side>_ns/point and
// <side>_allocs/point (for a histogram, a point is one pdata histogram point, 13 series in
// VictoriaMetrics' input), and x_victoriametrics = victoriametrics ns/point ÷ window_aggregator's,
// x_metricstransform likewise (above 1: window_aggregator is faster). At GOMAXPROCS 1: the figures are
// per core. Scrapes are a second of event time apart, from an hour ago: window_aggregator's 1-minute
// windows fire every 60 scrapes.
//
// metricstransform aggregates each batch on its own (a cumulative counter's values summed across
// pods, per batch); VictoriaMetrics by arrival over its interval; window_aggregator by event time,
// with each stream's increase, resets and lateness.
func BenchmarkMetricsIn(b *testing.B) {
	for _, kind := range []metricKind{kindCounter, kindGauge, kindHistogram} {
		b.Run("kind="+string(kind), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			sides := []*metricSide{newWindowAggregatorMetrics(b, kind, new(consumertest.MetricsSink)),
				newVictoriaMetrics(b, kind, func([]prompb.TimeSeries) {}, nil), newMetricsTransform(b, kind)}
			defer func() {
				for _, s := range sides {
					s.stop()
				}
			}()
			sb := newScrapeBuilder(kind, time.Now().Add(-time.Hour-time.Duration(b.N)*time.Second))
			var ms runtime.MemStats
			points := 0
			b.ResetTimer()
			for k := range b.N {
				b.StopTimer()
				sc := sb.next(k)
				points += sc.pts
				for j := range sides {
					s := sides[(j+k)%len(sides)]
					in := sc
					if s.clone {
						in.pd = pmetric.NewMetrics()
						sc.pd.CopyTo(in.pd)
					}
					runtime.ReadMemStats(&ms)
					before := ms.Mallocs
					t0 := time.Now()
					s.consume(&in)
					s.elapsed += time.Since(t0)
					runtime.ReadMemStats(&ms)
					s.mallocs += ms.Mallocs - before
				}
				b.StartTimer()
			}
			b.StopTimer()
			for _, s := range sides {
				b.ReportMetric(float64(s.elapsed.Nanoseconds())/float64(points), s.name+"_ns/point")
				b.ReportMetric(float64(s.mallocs)/float64(points), s.name+"_allocs/point")
			}
			wa := float64(sides[0].elapsed)
			b.ReportMetric(float64(sides[1].elapsed)/wa, "x_victoriametrics")
			b.ReportMetric(float64(sides[2].elapsed)/wa, "x_metricstransform")
		})
	}
}

// The sides agree on what they were given: over 130 scrapes, window_aggregator's per-(service,
// route) increase of the counters, and of each histogram bucket, as its last cumulative point holds
// it once every window has fired, and VictoriaMetrics' increase output over the same samples (flushed
// at its stop) are the same, and are the true increase since each series' first scrape (which, for a
// stream that started before either began watching, only sets the base).
func TestMetricsInSidesCountTheSame(t *testing.T) {
	for _, kind := range []metricKind{kindCounter, kindHistogram} {
		t.Run(string(kind), func(t *testing.T) {
			sink := new(consumertest.MetricsSink)
			var vmOut []prompb.TimeSeries
			wa := newWindowAggregatorMetrics(t, kind, sink)
			vm := newVictoriaMetrics(t, kind, func(tss []prompb.TimeSeries) {
				for _, ts := range tss {
					vmOut = append(vmOut, prompb.TimeSeries{Labels: append([]prompb.Label(nil), ts.Labels...), Samples: append([]prompb.Sample(nil), ts.Samples...)})
				}
			}, &streamaggr.Options{FlushOnShutdown: true})
			sb := newScrapeBuilder(kind, time.Now().Add(-time.Hour))
			first := map[string]float64{}
			var last metricScrape
			for k := range 130 {
				sc := sb.next(k)
				if k == 0 {
					for _, ts := range sc.vm {
						first[vmKey(ts.Labels, false)] += -ts.Samples[0].Value
					}
				}
				wa.consume(&sc)
				vm.consume(&sc)
				last = sc
			}
			want := first // the true increase: last - first, summed over pods
			for _, ts := range last.vm {
				want[vmKey(ts.Labels, false)] += ts.Samples[0].Value
			}
			wa.stop() // fires every window: without storage, the open ones as they stand
			vm.stop()
			gotVM := map[string]float64{}
			for _, ts := range vmOut {
				gotVM[vmKey(ts.Labels, true)] += ts.Samples[0].Value
			}
			gotWA := waIncreases(sink.AllMetrics())
			for k, w := range want {
				if strings.HasPrefix(k, "duration_sum") || strings.HasPrefix(k, "duration_count") {
					continue // the histogram's buckets are compared; its sum and count go with them
				}
				if gotVM[k] != w || gotWA[k] != w {
					t.Errorf("%s: window_aggregator %v, victoriametrics %v, true %v", k, gotWA[k], gotVM[k], w)
				}
			}
			if len(want) == 0 || len(gotWA) == 0 {
				t.Fatal("nothing compared")
			}
		})
	}
}

// vmKey keys a series by its name (without the output's suffix), service, route and le.
func vmKey(labels []prompb.Label, output bool) string {
	var name, svc, route, le string
	for _, l := range labels {
		switch l.Name {
		case "__name__":
			name = l.Value
		case "service":
			svc = l.Value
		case "route":
			route = l.Value
		case "le":
			le = l.Value
		}
	}
	if output {
		name, _, _ = strings.Cut(name, ":")
	}
	return name + " " + svc + " " + route + " " + le
}

// waIncreases reads window_aggregator's last cumulative points as vmKey keys them: the counter's sum,
// and the histogram's buckets as le counts.
func waIncreases(all []pmetric.Metrics) map[string]float64 {
	out := map[string]float64{}
	lastEnd := map[string]pcommon.Timestamp{}
	for _, md := range all {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				m := ms.At(j)
				switch m.Type() {
				case pmetric.MetricTypeSum:
					dps := m.Sum().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						dp := dps.At(d)
						svc, _ := dp.Attributes().Get("service.name")
						route, _ := dp.Attributes().Get("http.route")
						k := "requests_total " + svc.Str() + " " + route.Str() + " "
						if dp.Timestamp() >= lastEnd[k] {
							lastEnd[k], out[k] = dp.Timestamp(), dp.DoubleValue()
						}
					}
				case pmetric.MetricTypeHistogram:
					dps := m.Histogram().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						dp := dps.At(d)
						svc, _ := dp.Attributes().Get("service.name")
						route, _ := dp.Attributes().Get("http.route")
						base := "duration_bucket " + svc.Str() + " " + route.Str() + " "
						if dp.Timestamp() < lastEnd[base] {
							continue
						}
						lastEnd[base] = dp.Timestamp()
						var le uint64
						for b, c := range dp.BucketCounts().All() {
							le += c
							bound := "+Inf"
							if b < len(metricBounds) {
								bound = strconv.FormatFloat(metricBounds[b], 'g', -1, 64)
							}
							out[base+bound] = float64(le)
						}
					}
				}
			}
		}
	}
	return out
}
