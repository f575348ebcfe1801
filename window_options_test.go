package windowaggregator

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
)

// window.offset: 10 s tumbling windows moved back 3 s start at 7 s past a multiple of 10. Spans
// ending at 6.999 s, 7 s, 16.999 s and 17 s fall in [-3, 7), [7, 17), [7, 17) and [17, 27): each
// window's count, at its own bounds, once W passes its end.
func TestOffsetWindowsAtTheirBoundaries(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Window.Offset = -3 * time.Second
	cfg.Aggregations = []AggregationConfig{{Name: "o", Signal: "spans", Outputs: []string{"count"}}}
	h := newConnectorHarness(t, cfg, false)
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 6.999, ms: 1, id: 1}, spanSpec{service: "a", name: "x", end: 7, ms: 1, id: 2},
		spanSpec{service: "a", name: "x", end: 16.999, ms: 1, id: 3}, spanSpec{service: "a", name: "x", end: 17, ms: 1, id: 4}))
	h.sendTraces(traces(spanSpec{service: "a", name: "x", end: 27, ms: 1, id: 5})) // W = 27: [17, 27) fires too
	ps := find(points(h.metrics.AllMetrics()), "o.count", "")
	got := map[[2]int64]float64{}
	for _, p := range ps {
		got[[2]int64{p.start, p.end}] = p.value
	}
	want := map[[2]int64]float64{{-3, 7}: 1, {7, 17}: 2, {17, 27}: 1}
	if len(got) != len(want) {
		t.Fatalf("windows %v, want %v", got, want)
	}
	for w, v := range want {
		if got[w] != v {
			t.Errorf("[%d, %d): %v, want %v (all: %v)", w[0], w[1], got[w], v, got)
		}
	}
}

// window.offset and window.early_results are refused, naming the key, outside what the contract
// allows.
func TestOffsetAndEarlyResultsValidation(t *testing.T) {
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Window.Offset = 10 * time.Second }, "window.offset: must be strictly between -10s and 10s"},
		{func(c *Config) { c.Window.Offset = -10 * time.Second }, "window.offset"},
		{func(c *Config) { c.Window.Slide, c.Window.Offset = 5*time.Second, 6*time.Second }, "window.offset: must be strictly between -5s and 5s"},
		{func(c *Config) { c.Window.EarlyResults = 10 * time.Second }, "window.early_results: must be > 0 and < window.size"},
		{func(c *Config) { c.Window.EarlyResults = -time.Second }, "window.early_results"},
		{func(c *Config) { c.Window.Slide, c.Window.EarlyResults = 5*time.Second, time.Second }, "window.early_results: applies to tumbling windows only"},
	} {
		cfg := baseConfig()
		c.set(cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans"}}
	cfg.Window.Offset, cfg.Window.EarlyResults = -9*time.Second, 9*time.Second
	if err := cfg.Validate(); err != nil {
		t.Errorf("offset -9s and early results 9s of 10 s windows: %v", err)
	}
}

// window.early_results: one-minute windows with results every 20 s, through the connector, both
// temporalities. Series a has spans of 1, 2 ms at 5, 15 s; 4 ms at 25 s; 8 ms at 45 s, 16 ms at 55
// s. Series b has one of 3 ms at 10 s. W moves with the spans of c, 21 s, 41 s, 61 s, each in a batch
// of its own (W is the greatest event time of a batch), that close [0, 20), [0, 40) and the window.
//
//	at 20 s  a: count 2, sum 3, avg 1.5, rate 2/20      b: count 1, sum 3
//	at 40 s  a: count 3, sum 7 (delta: 1, 4 from 20 s)  b: nothing new, no point
//	at 60 s  a: count 5, sum 31 (delta: 2, 24 from 40 s), avg 6.2, rate 5/60   b: count 1 (delta: none)
//
// b's window fires at 60 s with its gauges; its delta point would carry nothing, and is not made. The
// delta points of a window add up to its total; the cumulative ones are one monotonic counter.
func TestEarlyResultsInBothTemporalities(t *testing.T) {
	type pt struct {
		start, end int64
		v          float64
	}
	batches := func() [][]spanSpec {
		a := func(end, ms float64, id uint64) spanSpec {
			return spanSpec{service: "a", name: "x", end: end, ms: ms, id: id}
		}
		c := func(end float64, id uint64) spanSpec {
			return spanSpec{service: "c", name: "x", end: end, ms: 1, id: id}
		}
		return [][]spanSpec{
			{a(5, 1, 1), a(15, 2, 2), {service: "b", name: "x", end: 10, ms: 3, id: 3}},
			{c(21, 5)}, {a(25, 4, 4)},
			{c(41, 7)}, {a(45, 8, 6)}, {a(55, 16, 8)},
			{c(61, 9)},
		}
	}
	run := func(t *testing.T, temporality Temporality) []point {
		useFakeClock(t)
		cfg := baseConfig()
		cfg.Window.Size, cfg.Window.EarlyResults = time.Minute, 20*time.Second
		cfg.Temporality, cfg.LateFirings = temporality, lateFold
		cfg.Aggregations = []AggregationConfig{{Name: "e", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count", "sum", "avg", "rate"}}}
		sink := new(consumertest.MetricsSink)
		h := newConnectorHarnessTo(t, cfg, sink)
		for _, b := range batches() {
			h.sendTraces(traces(b...))
		}
		return points(sink.AllMetrics())
	}
	series := func(ps []point, metric, svc string) []pt {
		var out []pt
		for _, p := range find(ps, metric, "service.name="+svc+"(Str)") {
			out = append(out, pt{p.start, p.end, p.value})
		}
		return out
	}
	for _, temporality := range []Temporality{temporalityCumulative, temporalityDelta} {
		t.Run(string(temporality), func(t *testing.T) {
			ps := run(t, temporality)
			want := map[string][]pt{
				"a/e.count": {{0, 20, 2}, {0, 40, 3}, {0, 60, 5}},
				"a/e.sum":   {{0, 20, 3}, {0, 40, 7}, {0, 60, 31}},
				"a/e.avg":   {{0, 20, 1.5}, {0, 40, 7.0 / 3}, {0, 60, 6.2}},
				"a/e.rate":  {{0, 20, 0.1}, {0, 40, 3.0 / 40}, {0, 60, 5.0 / 60}},
				"b/e.count": {{0, 20, 1}, {0, 60, 1}},
				"b/e.avg":   {{0, 20, 3}, {0, 60, 3}},
			}
			if temporality == temporalityDelta {
				want["a/e.count"] = []pt{{0, 20, 2}, {20, 40, 1}, {40, 60, 2}}
				want["a/e.sum"] = []pt{{0, 20, 3}, {20, 40, 4}, {40, 60, 24}}
				want["b/e.count"] = []pt{{0, 20, 1}}
			}
			for k, w := range want {
				svc, metric, _ := strings.Cut(k, "/")
				got := series(ps, metric, svc)
				if !slices.EqualFunc(got, w, func(a, b pt) bool { return a.start == b.start && a.end == b.end && math.Abs(a.v-b.v) < 1e-12 }) {
					t.Errorf("%s of %s: %v, want %v", metric, svc, got, w)
				}
			}
			// A replay of the same batches gives the same points (in another order, maybe: series
			// are spread over shards, walked from a random one).
			key := func(p point) string { return fmt.Sprintf("%s %s %d %d %v", p.metric, p.attrs, p.start, p.end, p.value) }
			first, again := make([]string, len(ps)), []string{}
			for i, p := range ps {
				first[i] = key(p)
			}
			for _, p := range run(t, temporality) {
				again = append(again, key(p))
			}
			slices.Sort(first)
			slices.Sort(again)
			if !slices.Equal(first, again) {
				t.Errorf("a replay gave\n%s\nthe first run\n%s", strings.Join(again, "\n"), strings.Join(first, "\n"))
			}
		})
	}
}
