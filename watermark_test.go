package windowaggregator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Wall-clock times in these tests are around base, a whole number of minutes, in seconds.
const base = 1_800_000_000

// readmeWindows is the README's settings: 1m windows, 5s out-of-orderness, 30s lateness.
func readmeWindows() *Config {
	cfg := baseConfig()
	cfg.Window.Size = time.Minute
	cfg.Watermark.MaxOutOfOrderness = 5 * time.Second
	cfg.AllowedLateness = 30 * time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("service.name")}}
	return cfg
}

// tally is what a test expects: records per service and window start (seconds).
type expected map[string]map[int64]int

func (e expected) add(service string, t float64, size int64) {
	if e[service] == nil {
		e[service] = map[int64]int{}
	}
	e[service][int64(t)/size*size]++
}

// countsByWindow sums the count points the sink received, per service and window start.
func countsByWindow(ps []point, metric string) expected {
	got := expected{}
	for _, p := range ps {
		if p.metric != metric {
			continue
		}
		svc := strings.TrimSuffix(strings.TrimPrefix(p.attrs, "service.name="), "(Str)")
		if got[svc] == nil {
			got[svc] = map[int64]int{}
		}
		got[svc][p.start] += int(p.value)
	}
	return got
}

func compareCounts(t *testing.T, got, want expected) {
	t.Helper()
	for svc, ws := range want {
		for start, n := range ws {
			if got[svc][start] != n {
				t.Errorf("%s [%d, +size): count %d, want %d", svc, start-base, got[svc][start], n)
			}
		}
	}
	for svc, ws := range got {
		for start, n := range ws {
			if want[svc][start] == 0 {
				t.Errorf("%s [%d, +size): count %d of nothing sent", svc, start-base, n)
			}
		}
	}
}

func lateTotal(t *testing.T, h *connectorHarness) int64 {
	t.Helper()
	var n int64
	for _, reason := range []string{reasonExpired, reasonFuture, reasonInvalid} {
		for _, action := range ingest.LateActionNames {
			n += counterValue(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": reason, "action": action})
		}
	}
	return n
}

// A host whose clock runs 2 minutes ahead, among on-time services: its spans are aggregated in their
// windows, and no span of the other services is late.
func TestSkewedHostLosesNoRecordOfOtherServices(t *testing.T) {
	clk := useFakeClock(t)
	clk.Set(time.Unix(base, 0))
	h := newConnectorHarness(t, readmeWindows(), true)
	want := expected{}
	for i := range 300 {
		now := float64(base + i)
		clk.Set(time.Unix(int64(now), 0))
		for _, svc := range []string{"a", "b"} {
			end := now - float64(i%3) // up to 2 s behind the clock
			h.sendTraces(traces(spanSpec{service: svc, name: "x", end: end}))
			want.add(svc, end, 60)
		}
		h.sendTraces(traces(spanSpec{service: "skewed", name: "x", end: now + 120}))
		want.add("skewed", now+120, 60)
	}
	// W follows the clock: the on-time services' windows that ended 5 s before now have fired.
	fired := countsByWindow(points(h.metrics.AllMetrics()), "n.count")
	for start := int64(base); start+60 <= base+300-5; start += 60 {
		if fired["a"][start] != want["a"][start] {
			t.Errorf("a [%d, +60s) had fired %d of %d before shutdown", start-base, fired["a"][start], want["a"][start])
		}
	}
	if w := lookup(t).Engine.Watermark(); w != (base+299-5)*s {
		t.Errorf("W = base%+ds, want the clock less max_out_of_orderness, base+294s", w/s-base)
	}
	h.shutdown()
	compareCounts(t, countsByWindow(points(h.metrics.AllMetrics()), "n.count"), want)
	if n := lateTotal(t, h); n != 0 || h.lateTraces.SpanCount() != 0 {
		t.Errorf("%d records late, %d routed; want none", n, h.lateTraces.SpanCount())
	}
	wantCounter(t, h.tel, "otelcol_window_aggregator_clock_skew_records", map[string]string{"reason": "ahead_of_clock"}, 300)
}

// One span stamped 60 s ahead, with the demo's settings and idle_timeout: later on-time spans are
// aggregated, also after a silence long enough for the idle rule.
func TestStraySpanAheadWithIdleTimeoutLosesNothing(t *testing.T) {
	clk := useFakeClock(t)
	cfg := baseConfig()
	cfg.Watermark.MaxOutOfOrderness = 2 * time.Second
	cfg.Watermark.IdleTimeout = 15 * time.Second
	cfg.AllowedLateness = 30 * time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("service.name")}}
	h := newConnectorHarness(t, cfg, true)
	emit := lookup(t)
	want := expected{}
	for i := range 200 {
		now := float64(base + i)
		clk.Set(time.Unix(int64(now), 0))
		emit.emit(context.Background(), false) // a collection and a delivery, as at each tick of the second
		if i >= 80 && i < 120 {
			continue // 40 s of silence: the idle rule moves W with the clock
		}
		h.sendTraces(traces(spanSpec{service: "a", name: "x", end: now - 1}))
		want.add("a", now-1, 10)
		if i == 20 {
			h.sendTraces(traces(spanSpec{service: "stray", name: "x", end: now + 60}))
			want.add("stray", now+60, 10)
		}
	}
	h.shutdown()
	compareCounts(t, countsByWindow(points(h.metrics.AllMetrics()), "n.count"), want)
	if n := lateTotal(t, h); n != 0 {
		t.Errorf("%d records late, want none", n)
	}
	wantCounter(t, h.tel, "otelcol_window_aggregator_clock_skew_records", map[string]string{"reason": "ahead_of_clock"}, 1)
}

// gaugeValue returns the value of an int64 or float64 gauge's point with attribute key=value ("" for
// any), and whether there is one.
func gaugeValue(t *testing.T, tel *componenttest.Telemetry, name, key, value string) (float64, bool) {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0, false
	}
	switch g := m.Data.(type) {
	case metricdata.Gauge[int64]:
		for _, dp := range g.DataPoints {
			if v, ok := dp.Attributes.Value(attribute.Key(key)); key == "" || ok && v.AsString() == value {
				return float64(dp.Value), true
			}
		}
	case metricdata.Gauge[float64]:
		for _, dp := range g.DataPoints {
			if v, ok := dp.Attributes.Value(attribute.Key(key)); key == "" || ok && v.AsString() == value {
				return dp.Value, true
			}
		}
	default:
		t.Fatalf("%s is a %T, want a gauge", name, m.Data)
	}
	return 0, false
}

// withInstance adds service.instance.id to the resource of every span in td.
func withInstance(td ptrace.Traces, id string) ptrace.Traces {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		td.ResourceSpans().At(i).Resource().Attributes().PutStr("service.instance.id", id)
	}
	return td
}

// With per_source, a source 90 s behind holds W back, and none of its records expire, until it falls
// silent for source_idle_timeout; then W follows the others.
func TestPerSourceHoldsALaggingSourceUntilItFallsSilent(t *testing.T) {
	for _, perSource := range []bool{true, false} {
		t.Run(fmt.Sprintf("per_source=%v", perSource), func(t *testing.T) {
			clk := useFakeClock(t)
			cfg := readmeWindows()
			if perSource {
				cfg.Watermark.PerSource = []string{"service.instance.id"}
			}
			h := newConnectorHarness(t, cfg, true)
			want := expected{}
			for i := range 240 {
				now := float64(base + i)
				clk.Set(time.Unix(int64(now), 0))
				h.sendTraces(withInstance(traces(spanSpec{service: "slow", name: "x", end: now - 90}), "slow-1"))
				want.add("slow", now-90, 60)
				h.sendTraces(withInstance(traces(spanSpec{service: "fast", name: "x", end: now}), "fast-1"))
				want.add("fast", now, 60)
			}
			if !perSource {
				// The control: one watermark follows the fast source and expires the slow one's records.
				if lateTotal(t, h) == 0 {
					t.Fatal("without per_source the slow source's records should expire")
				}
				return
			}
			sh := lookup(t)
			// Held at the slow source's greatest event time (base+239-90) less 5 s.
			if w := sh.Engine.Watermark(); w != (base+239-95)*s {
				t.Fatalf("W = base%+ds, want base+144s (held by the slow source)", w/s-base)
			}
			if n, _ := gaugeValue(t, h.tel, "otelcol_window_aggregator_watermark_sources", "", ""); n != 2 {
				t.Errorf("watermark_sources = %v, want 2", n)
			}
			if lag, ok := gaugeValue(t, h.tel, "otelcol_window_aggregator_watermark_lag", "held_by", "source"); !ok || lag != 95 {
				t.Errorf("watermark_lag{held_by=source} = %v (%v), want 95", lag, ok)
			}
			// The slow source falls silent; W stays until source_idle_timeout (1m) has passed.
			for i := 240; i < 320; i++ {
				now := float64(base + i)
				clk.Set(time.Unix(int64(now), 0))
				h.sendTraces(withInstance(traces(spanSpec{service: "fast", name: "x", end: now}), "fast-1"))
				want.add("fast", now, 60)
				w := sh.Engine.Watermark()
				switch {
				case i < 239+60 && w != (base+239-95)*s:
					t.Fatalf("%d s after the slow source's last batch, W = base%+ds, want it still held at base+144s", i-239, w/s-base)
				case i > 239+60 && w != (base+int64(i)-5)*s:
					t.Fatalf("%d s after the slow source's last batch, W = base%+ds, want the fast source's, base%+ds", i-239, w/s-base, i-5)
				}
			}
			h.shutdown()
			compareCounts(t, countsByWindow(points(h.metrics.AllMetrics()), "n.count"), want)
			if n := lateTotal(t, h); n != 0 {
				t.Errorf("%d records late, want none", n)
			}
		})
	}
}

// Past max_sources, further sources share one watermark, and their records are counted.
func TestSourcesPastMaxSourcesShareOne(t *testing.T) {
	clk := useFakeClock(t)
	clk.Set(time.Unix(base, 0))
	cfg := readmeWindows()
	cfg.Watermark.PerSource = []string{"service.instance.id"}
	cfg.Watermark.MaxSources = 2
	h := newConnectorHarness(t, cfg, true)
	td := ptrace.NewTraces() // one batch from four sources: W is the least of their watermarks
	for i, id := range []string{"a", "b", "c", "d"} {
		td.ResourceSpans().AppendEmpty()
		withInstance(traces(spanSpec{service: "s", name: "x", end: base - float64(i)}), id).ResourceSpans().At(0).CopyTo(td.ResourceSpans().At(i))
	}
	h.sendTraces(td)
	wantCounter(t, h.tel, "otelcol_window_aggregator_shared_source_records", nil, 2)
	if n, _ := gaugeValue(t, h.tel, "otelcol_window_aggregator_watermark_sources", "", ""); n != 3 {
		t.Errorf("watermark_sources = %v, want 3: two of their own and the shared one", n)
	}
	// W is the least: the shared source's greatest event time is that of c (base-2), less 5 s.
	if w := lookup(t).Engine.Watermark(); w != (base-7)*s {
		t.Errorf("W = base%+ds, want base-7s", w/s-base)
	}
}

// The routed records' late.watermark is a W under which every window holding them had expired, with
// four senders at once.
func TestLateWatermarkIsTheOneEachRecordWasJudgedBy(t *testing.T) {
	clk := useFakeClock(t)
	clk.Set(time.Unix(base+1000, 0))
	cfg := baseConfig()
	cfg.Window.Slide = 5 * time.Second
	cfg.Window.Size = 20 * time.Second
	cfg.AllowedLateness = 5 * time.Second
	cfg.Aggregations = []AggregationConfig{
		{Name: "n", Signal: "spans", GroupBy: keys("service.name")},
		{Name: "m", Signal: "spans", GroupBy: keys("span.name")},
	}
	h := newConnectorHarness(t, cfg, true)
	const senders, batches, perBatch = 4, 150, 20
	inParallel(senders, func(g int) {
		rng := rand.New(rand.NewPCG(uint64(g), 7))
		for b := range batches {
			front := float64(base + b) // each sender's event time moves at 1 s per batch
			var specs []spanSpec
			for range perBatch {
				end := front - rng.Float64()*40 // up to 40 s behind: some late, some expired
				specs = append(specs, spanSpec{service: fmt.Sprintf("s%d", rng.IntN(8)), name: fmt.Sprintf("n%d", rng.IntN(5)), end: end})
			}
			for _, c := range h.traces {
				if err := c(context.Background(), traces(specs...)); err != nil {
					t.Error(err)
				}
			}
		}
	})
	size, slide, lateness := int64(20*time.Second), int64(5*time.Second), int64(5*time.Second)
	routed := 0
	for _, td := range h.lateTraces.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sps := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
			for k := 0; k < sps.Len(); k++ {
				sp := sps.At(k)
				routed++
				w, ok := sp.Attributes().Get(ingest.AttrWatermark)
				if !ok {
					t.Fatal("a routed span without late.watermark")
				}
				end := int64(sp.EndTimestamp())
				lastWindowEnd := end/slide*slide + size // the latest window that holds the span
				if lastWindowEnd+lateness > w.Int() {
					t.Fatalf("span at base%+.3fs routed as expired under W = base%+.3fs, under which its window ending at base%+ds had not expired",
						float64(end)/1e9-base, float64(w.Int())/1e9-base, lastWindowEnd/s-base)
				}
			}
		}
	}
	if routed == 0 {
		t.Fatal("no span was routed: the test checks nothing")
	}
	if n := counterValue(t, h.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "expired", "action": "routed"}); n != int64(routed) {
		t.Errorf("late_records{expired,routed} = %d, routed %d", n, routed)
	}
}

// size/slide above 10000 is a configuration error that names window.slide.
func TestWindowGeometryIsBounded(t *testing.T) {
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans"}}
	cfg.Window.Size, cfg.Window.Slide = time.Minute, time.Millisecond
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "window.slide") || !strings.Contains(err.Error(), "10000") {
		t.Fatalf("1m/1ms: %v, want an error naming window.slide and the limit", err)
	}
	cfg.Window.Size = 10 * time.Second // 10000 panes: the limit itself
	if err := cfg.Validate(); err != nil {
		t.Fatalf("10s/1ms: %v", err)
	}
	cm := confmap.NewFromStringMap(map[string]any{"window": map[string]any{"size": "1h", "slide": "1ms"}})
	cfg = createDefaultConfig().(*Config)
	must(t, cm.Unmarshal(cfg))
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "window.slide") {
		t.Fatalf("1h/1ms from YAML: %v", err)
	}
}

// After a restart with storage, time the collector was down is not silence: the spans agents queued
// meanwhile are not expired by the idle rule.
func TestRestartDoesNotCountDowntimeAsSilence(t *testing.T) {
	clk := useFakeClock(t)
	clk.Set(time.Unix(base, 0))
	cfg := latencyConfig()
	cfg.AllowedLateness = 0
	cfg.Watermark.IdleTimeout = 5 * time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", GroupBy: keys("service.name")}}
	st := &memStorage{data: map[string][]byte{}}
	run := func(batches ...[]spanSpec) ([]point, *componenttest.Telemetry) {
		return runStorageEach(t, cfg, st, func(b []spanSpec) {
			clk.Advance(time.Second) // spans are sent a second or more after they end
			for _, sp := range b {
				if end := time.Unix(int64(sp.end)+1, 0); end.After(time.Unix(0, clk.Now())) {
					clk.Set(end)
				}
			}
			lookup(t).emit(context.Background(), false) // a collection and a delivery, as at each tick
		}, batches...)
	}
	run([]spanSpec{{service: "a", name: "x", end: base + 1}}, []spanSpec{{service: "a", name: "x", end: base + 2}})
	clk.Advance(12 * time.Second) // down for 12 s while agents queue spans
	var queued []spanSpec
	for i := 3; i < 15; i++ {
		queued = append(queued, spanSpec{service: "a", name: "x", end: base + float64(i)})
	}
	ps, tel := run(queued, []spanSpec{{service: "a", name: "x", end: base + 21}})
	if n := counterValue(t, tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "expired", "action": "dropped"}); n != 0 {
		t.Fatalf("%d queued spans expired after the restart, want none", n)
	}
	more, _ := run([]spanSpec{{service: "a", name: "x", end: base + 31}})
	got := countsByWindow(append(ps, more...), "n.count")
	if got["a"][base] != 9 || got["a"][base+10] != 5 || got["a"][base+20] != 1 {
		t.Fatalf("windows after the restart: %v, want [base,+10s) 9 (2 before, 7 queued), [base+10,+10s) 5 (queued), [base+20,+10s) 1", got["a"])
	}
}

// processorForm is every processor instance of one id, as the collector builds them for a traces, a
// logs and a metrics pipeline.
type processorForm struct {
	traces  processor.Traces
	logs    processor.Logs
	metrics processor.Metrics
	out     *consumertest.MetricsSink
	tel     *componenttest.Telemetry
}

func newProcessorForm(t *testing.T, cfg *Config, host component.Host) *processorForm {
	t.Helper()
	f := NewFactory()
	p := &processorForm{out: new(consumertest.MetricsSink), tel: componenttest.NewTelemetry()}
	set := processortest.NewNopSettings(Type)
	set.TelemetrySettings = p.tel.NewTelemetrySettings()
	var err error
	ctx := testContext(t)
	p.traces, err = f.CreateTraces(ctx, set, cfg, consumertest.NewNop())
	must(t, err)
	p.logs, err = f.CreateLogs(ctx, set, cfg, consumertest.NewNop())
	must(t, err)
	p.metrics, err = f.CreateMetrics(ctx, set, cfg, p.out)
	must(t, err)
	for _, c := range []component.Component{p.metrics, p.traces, p.logs} {
		must(t, c.Start(ctx, host))
	}
	return p
}

// shutdownOrder is one order the collector may shut the instances down in: unrelated pipelines in
// any order, each pipeline's batch processor (which flushes its records on its own Shutdown) before
// the instances it feeds.
type shutdownStep struct {
	name string
	run  func()
}

func shuffledShutdown(rng *rand.Rand, flushTraces, flushLogs func(), instances map[string]component.Component, signal map[string]string) []shutdownStep {
	names := make([]string, 0, len(instances))
	for n := range instances {
		names = append(names, n)
	}
	slices.Sort(names)
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	var steps []shutdownStep
	flushed := map[string]bool{}
	for _, n := range names {
		if sig := signal[n]; sig != "" && !flushed[sig] {
			flushed[sig] = true
			flush := flushTraces
			if sig == "logs" {
				flush = flushLogs
			}
			steps = append(steps, shutdownStep{"flush " + sig, flush})
		}
		c := instances[n]
		steps = append(steps, shutdownStep{"shutdown " + n, func() { _ = c.Shutdown(context.Background()) }})
	}
	return steps
}

// The shutdown orders of the collector lose nothing in the connector form: records flushed by one
// pipeline's batch processor after another pipeline's output shut down are aggregated and delivered.
func TestShutdownInAnyOrderLosesNothingConnector(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	for run := range 200 {
		clk := useFakeClock(t)
		clk.Set(time.Unix(base+100, 0))
		cfg := baseConfig()
		cfg.Aggregations = []AggregationConfig{
			{Name: "spans", Signal: "spans", GroupBy: keys("service.name")},
			{Name: "logs", Signal: "logs", GroupBy: keys("service.name")},
		}
		h := newConnectorHarness(t, cfg, true)
		h.sendTraces(traces(spanSpec{service: "a", name: "x", end: base + 1}))
		h.sendLogs(logs(logSpec{service: "a", ts: base + 1}))
		var held []logSpec // what the logs pipeline's batch processor holds at shutdown
		for i := range 100 {
			held = append(held, logSpec{service: "a", ts: base + 2 + float64(i)/20})
		}
		steps := shuffledShutdown(rng,
			func() { h.sendTraces(traces(spanSpec{service: "a", name: "x", end: base + 2})) },
			func() { h.sendLogs(logs(held...)) },
			map[string]component.Component{"t2m": h.t2m, "t2t": h.t2t, "l2m": h.l2m, "l2l": h.l2l},
			map[string]string{"t2m": "traces", "t2t": "traces", "l2m": "logs", "l2l": "logs"})
		var order []string
		for _, st := range steps {
			order = append(order, st.name)
			st.run()
		}
		h.t2t, h.l2l, h.t2m, h.l2m = nil, nil, nil, nil
		ps := points(h.metrics.AllMetrics())
		if got := countsByWindow(ps, "logs.count")["a"][base]; got != 101 {
			t.Fatalf("run %d, %s: logs counted %d, want 101", run, strings.Join(order, ", "), got)
		}
		if got := countsByWindow(ps, "spans.count")["a"][base]; got != 2 {
			t.Fatalf("run %d, %s: spans counted %d, want 2", run, strings.Join(order, ", "), got)
		}
		if n := lateTotal(t, h); n != 0 {
			t.Fatalf("run %d, %s: %d records late", run, strings.Join(order, ", "), n)
		}
	}
}

// The processor form: the metrics pipeline may stop before the traces and logs pipelines. Records
// that come after it stopped are aggregated, never late; with storage they are saved and delivered
// after the next start, so nothing is lost in any order; without, they are counted as dropped.
func TestShutdownInAnyOrderProcessor(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2))
	for _, withStorage := range []bool{true, false} {
		for run := range 100 {
			clk := useFakeClock(t)
			clk.Set(time.Unix(base+100, 0))
			cfg := baseConfig()
			cfg.AllowedLateness = 30 * time.Second // each pipeline's flush is within lateness of the other's
			cfg.Aggregations = []AggregationConfig{
				{Name: "spans", Signal: "spans", GroupBy: keys("service.name")},
				{Name: "logs", Signal: "logs", GroupBy: keys("service.name")},
			}
			st := &memStorage{data: map[string][]byte{}}
			var host component.Host = componenttest.NewNopHost()
			if withStorage {
				cfg.Storage = &storageID
				host = hostWith{storageID: st}
			}
			p := newProcessorForm(t, cfg, host)
			ctx := context.Background()
			must(t, p.traces.ConsumeTraces(ctx, traces(spanSpec{service: "a", name: "x", end: base + 1})))
			must(t, p.logs.ConsumeLogs(ctx, logs(logSpec{service: "a", ts: base + 1})))
			var held []logSpec // 80 in [base, base+10), 20 in the next window: W passes base+10
			for i := range 100 {
				held = append(held, logSpec{service: "a", ts: base + 2 + float64(i)/10})
			}
			// Records sent while the metrics output runs, and after it stopped.
			metricsStopped, spansBefore, logsBefore, after := false, 1, 1, 0
			steps := shuffledShutdown(rng,
				func() {
					must(t, p.traces.ConsumeTraces(ctx, traces(spanSpec{service: "a", name: "x", end: base + 12})))
					if metricsStopped {
						after++
					} else {
						spansBefore++
					}
				},
				func() {
					must(t, p.logs.ConsumeLogs(ctx, logs(held...)))
					if metricsStopped {
						after += len(held)
					} else {
						logsBefore += len(held)
					}
				},
				map[string]component.Component{"traces": p.traces, "logs": p.logs, "metrics": p.metrics},
				map[string]string{"traces": "traces", "logs": "logs"})
			var order []string
			for _, step := range steps {
				order = append(order, step.name)
				step.run()
				if step.name == "shutdown metrics" {
					metricsStopped = true
				}
			}
			name := fmt.Sprintf("storage=%v run %d, %s", withStorage, run, strings.Join(order, ", "))
			if n := counterValue(t, p.tel, "otelcol_window_aggregator_late_records", map[string]string{"reason": "expired", "action": "passed"}); n != 0 {
				t.Fatalf("%s: %d records late", name, n)
			}
			if n := counterValue(t, p.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "aggregated"}) +
				counterValue(t, p.tel, "otelcol_window_aggregator_records", map[string]string{"outcome": "late_updated"}); n != 103 {
				t.Fatalf("%s: %d records aggregated, want 103", name, n)
			}
			ps := points(p.out.AllMetrics())
			if withStorage {
				// The next start restores what was saved; a span past the window closes it.
				q := newProcessorForm(t, cfg, host)
				must(t, q.traces.ConsumeTraces(ctx, traces(spanSpec{service: "a", name: "x", end: base + 51})))
				for _, c := range []component.Component{q.traces, q.logs, q.metrics} {
					must(t, c.Shutdown(ctx))
				}
				ps = append(ps, points(q.out.AllMetrics())...)
			}
			byWindow := countsByWindow(ps, "logs.count")["a"]
			spansByWindow := countsByWindow(ps, "spans.count")["a"]
			gotLogs, gotSpans := byWindow[base]+byWindow[base+10], spansByWindow[base]+spansByWindow[base+10]
			dropped := counterValue(t, p.tel, "otelcol_window_aggregator_dropped_points", map[string]string{"reason": "shutdown"})
			switch {
			case withStorage || after == 0:
				if gotLogs != 101 || gotSpans != 2 || dropped != 0 {
					t.Fatalf("%s: logs %d of 101, spans %d of 2, %d points dropped", name, gotLogs, gotSpans, dropped)
				}
			default:
				// What came before the metrics output stopped was delivered; what came after is counted.
				if gotLogs != logsBefore || gotSpans != spansBefore || dropped == 0 {
					t.Fatalf("%s: delivered logs %d of the %d sent before the metrics output stopped, spans %d of %d; %d points dropped for the %d records after",
						name, gotLogs, logsBefore, gotSpans, spansBefore, dropped, after)
				}
			}
		}
	}
}

// A window size or slide below 1 ms is refused, naming the key and the likely cause (a number
// without a unit, read as nanoseconds), in YAML as in Go; so is a geometry whose series hold more
// than 1,000,000 panes while W follows the clock: 10 s windows sliding by 1 ms with 20 minutes of
// allowed_lateness hold (10 s + 1200 s) / 1 ms + 1 = 1,210,001.
func TestTinyWindowsAreRefused(t *testing.T) {
	for _, c := range []struct {
		window map[string]any
		key    string
	}{
		{map[string]any{"size": 10}, "window.size"},
		{map[string]any{"size": "10s", "slide": "500us"}, "window.slide"},
	} {
		cm := confmap.NewFromStringMap(map[string]any{"window": c.window,
			"aggregations": []any{map[string]any{"name": "n", "signal": "spans"}}})
		cfg := createDefaultConfig().(*Config)
		must(t, cm.Unmarshal(cfg))
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.key+": must be at least 1ms") || !strings.Contains(err.Error(), "without a unit") {
			t.Errorf("window %v: %v, want an error naming %s and a number without a unit", c.window, err, c.key)
		}
	}
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans"}}
	cfg.Window.Size, cfg.Window.Slide = 10*time.Second, time.Millisecond
	cfg.AllowedLateness = 20 * time.Minute
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "1210001 panes, more than 1000000") {
		t.Errorf("10s/1ms with 20m of lateness: %v, want an error naming the panes", err)
	}
	cfg.AllowedLateness = 5 * time.Minute // 310,001 panes
	if err := cfg.Validate(); err != nil {
		t.Errorf("10s/1ms with 5m of lateness: %v", err)
	}
}
