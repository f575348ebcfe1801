package windowaggregator

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// A reference model of metric points as input, against the component through its factories, in both
// forms and every output mode, with restarts on storage. The model does not derive increases from
// the points: it simulates the pods that export them, and knows the true increments between two
// exports of a pod, from which it works out what each window must hold by the contract: an increment
// in the window of the export that reports it; a new run's first export (a pod restarted) whole; a
// pod's first export only a base when its run began before the component started watching, or its
// points carry no start. A resent batch, with dedup, adds nothing: the points its first copy
// aggregated are duplicates, the others are judged again (a base is then out of order); without
// dedup it adds its gauges and deltas again, and nothing of its cumulative points (out of order). A
// lagging pod's points come within allowed_lateness.

// The model's pods export, at each of their times: reqs, a cumulative counter; depth, a gauge; bytes,
// a monotonic delta sum; lat (cumulative, even pods) or lat_delta (delta, odd pods), explicit
// histograms of bounds (1, 5, 10]; rpc, a cumulative exponential histogram at scale 0.
type modelPod struct {
	service, pod string
	noStart      bool // its points carry no start timestamp
	before       bool // its first run began before the component started
	lag          int64

	start    int64 // its run's start, s
	first    bool  // no export yet
	reqs     int64
	lat      [4]uint64
	latSum   int64
	rpc      map[int32]uint64
	rpcCount uint64
	rpcSum   int64
}

// modelCells are a model's expected totals, by aggregation, series and window start (s; -1: the
// series' total over every window).
type modelCells map[string]*modelCell2

type modelCell2 struct {
	count     uint64
	sum       float64
	min, max  float64
	hasValues bool
	buckets   map[int32]uint64 // explicit by index, exponential by bucket index
	// A window's gauge values and the pods they came from (the model's); its stddev, its number of
	// distinct pods and its rate (the component's).
	values              []float64
	pods                map[string]bool
	stddev, rate, nPods float64
}

func (c modelCells) at(agg, series string, window int64) *modelCell2 {
	k := fmt.Sprintf("%s|%s|%d", agg, series, window)
	cell := c[k]
	if cell == nil {
		cell = &modelCell2{buckets: map[int32]uint64{}}
		c[k] = cell
	}
	return cell
}

// add counts n values adding up to sum in both the window's cell and the series' total.
func (c modelCells) add(agg, series string, window int64, n uint64, sum float64, buckets map[int32]uint64) {
	for _, w := range []int64{window, -1} {
		cell := c.at(agg, series, w)
		cell.count += n
		cell.sum += sum
		for i, b := range buckets {
			cell.buckets[i] += b
		}
	}
}

// addValue counts a gauge value of pod, with its min and max.
func (c modelCells) addValue(agg, series, pod string, window int64, v float64) {
	c.add(agg, series, window, 1, v, nil)
	cell := c.at(agg, series, window)
	cell.values = append(cell.values, v)
	if cell.pods == nil {
		cell.pods = map[string]bool{}
	}
	cell.pods[pod] = true
	if !cell.hasValues || v < cell.min {
		cell.min = v
	}
	if !cell.hasValues || v > cell.max {
		cell.max = v
	}
	cell.hasValues = true
}

func latBucket(v int64) int32 {
	switch {
	case v <= 1:
		return 0
	case v <= 5:
		return 1
	case v <= 10:
		return 2
	}
	return 3
}

// rpcBucket is the index at scale 0 of v > 0: (2^i, 2^(i+1)].
func rpcBucket(v int64) int32 { return int32(bits.Len64(uint64(v-1))) - 1 }

type modelRun struct {
	pods    []*modelPod
	batches []modelBatch
	want    modelCells
	// points the aggregations take, by aggregation and outcome
	outcomes map[string]map[string]int64
}

type modelBatch struct {
	at     int64 // wall clock, s
	points []inPoint
	resend bool
}

func (m *modelRun) count(agg, outcome string, n int64) {
	if m.outcomes[agg] == nil {
		m.outcomes[agg] = map[string]int64{}
	}
	m.outcomes[agg][outcome] += n
}

// export makes pod p's points at t, and adds what they carry to the model.
func (m *modelRun) export(rng *rand.Rand, p *modelPod, t int64) []inPoint {
	win := t / 10 * 10
	svc := "service.name=" + p.service + "(Str)"
	restart := !p.first && rng.IntN(12) == 0
	// A pod without starts restarts visibly only below its last values: the counts it restarts with
	// are drawn below them.
	lastReqs, lastLat, lastRPC := p.reqs, p.lat[0]+p.lat[1]+p.lat[2]+p.lat[3], p.rpcCount
	if restart {
		p.start = t - 1
		p.reqs, p.lat, p.latSum, p.rpc, p.rpcCount, p.rpcSum = 0, [4]uint64{}, 0, map[int32]uint64{}, 0, 0
	}
	base := p.first && (p.before || p.noStart) // this export only sets the bases
	// reqs: its increment, counted unless a base
	inc := int64(rng.IntN(20))
	if restart && p.noStart && lastReqs > 0 {
		inc = int64(rng.IntN(int(lastReqs)))
	}
	p.reqs += inc
	if base {
		m.count("reqs", "base", 1)
	} else {
		m.want.add("reqs", svc, win, 1, float64(inc), nil)
		m.count("reqs", "aggregated", 1)
	}
	start := p.start
	if p.noStart {
		start = 0
	}
	out := []inPoint{{service: p.service, pod: p.pod, metric: "reqs", kind: inCounter, start: start, t: t, v: float64(p.reqs)}}
	if base {
		out[0].again = "out_of_order"
	}
	// depth and bytes: every point counts
	g := float64(rng.IntN(100))
	m.want.addValue("depth", svc, p.pod, win, g)
	b := float64(rng.IntN(50))
	m.want.add("bytes", "", win, 1, b, nil)
	m.count("depth", "aggregated", 1)
	m.count("bytes", "aggregated", 1)
	out = append(out, inPoint{service: p.service, pod: p.pod, metric: "depth", kind: inGauge, t: t, v: g},
		inPoint{service: p.service, pod: p.pod, metric: "bytes", kind: inDeltaSum, t: t, v: b})
	// lat: new observations
	var obs [4]uint64
	var obsSum int64
	n := rng.IntN(5)
	if restart && p.noStart && lastLat > 0 {
		n = rng.IntN(int(min(lastLat, 5)))
	}
	for range n {
		v := int64(rng.IntN(16))
		obs[latBucket(v)]++
		obsSum += v
	}
	buckets := map[int32]uint64{}
	for i, c := range obs {
		p.lat[i] += c
		buckets[int32(i)] = c
	}
	p.latSum += obsSum
	cumulative := p.pod[len(p.pod)-1]%2 == 0
	switch {
	case n == 0:
		if cumulative && base {
			m.count("lat", "base", 1)
		} else {
			m.count("lat", "empty", 1)
		}
	case cumulative && base:
		m.count("lat", "base", 1)
	default:
		m.want.add("lat", svc, win, uint64(n), float64(obsSum), buckets)
		m.count("lat", "aggregated", 1)
	}
	if cumulative {
		total := p.lat[0] + p.lat[1] + p.lat[2] + p.lat[3]
		out = append(out, inPoint{service: p.service, pod: p.pod, metric: "lat", kind: inCumulativeHistogram, start: start, t: t,
			hist: &inHist{count: total, sum: float64(p.latSum), bounds: bounds1510, buckets: slices.Clone(p.lat[:])}})
		if n == 0 || base {
			out[len(out)-1].again = "out_of_order"
		}
	} else {
		out = append(out, inPoint{service: p.service, pod: p.pod, metric: "lat_delta", kind: inHistogram, t: t,
			hist: &inHist{count: uint64(n), sum: float64(obsSum), bounds: bounds1510, buckets: slices.Clone(obs[:])}})
		if n == 0 {
			out[len(out)-1].again = "empty"
		}
	}
	// rpc: exponential, cumulative
	if p.rpc == nil {
		p.rpc = map[int32]uint64{}
	}
	rpcNew := map[int32]uint64{}
	k := rng.IntN(4)
	if restart && p.noStart && lastRPC > 0 {
		k = rng.IntN(int(min(lastRPC, 4)))
	}
	var rpcSum int64
	for range k {
		v := 1 + int64(rng.IntN(64))
		rpcNew[rpcBucket(v)]++
		rpcSum += v
	}
	for i, c := range rpcNew {
		p.rpc[i] += c
	}
	p.rpcCount += uint64(k)
	p.rpcSum += rpcSum
	switch {
	case base:
		m.count("rpc", "base", 1)
	case k == 0:
		m.count("rpc", "empty", 1)
	default:
		m.want.add("rpc", "", win, uint64(k), float64(rpcSum), rpcNew)
		m.count("rpc", "aggregated", 1)
	}
	counts := make([]uint64, 7) // indexes -1..5
	for i, c := range p.rpc {
		counts[i+1] = c
	}
	out = append(out, inPoint{service: p.service, pod: p.pod, metric: "rpc", kind: inCumulativeExponential, start: start, t: t,
		hist: &inHist{count: p.rpcCount, sum: float64(p.rpcSum), offset: -1, buckets: counts}})
	if base || k == 0 {
		out[len(out)-1].again = "out_of_order"
	}
	p.first = false
	return out
}

// newModelRun draws pods and their exports from 1001 s to about 1100 s, and the batches that deliver
// them.
func newModelRun(rng *rand.Rand) *modelRun {
	m := &modelRun{want: modelCells{}, outcomes: map[string]map[string]int64{}}
	for i := range 6 {
		p := &modelPod{service: string(rune('a' + i/2)), pod: fmt.Sprintf("p%d", i), first: true}
		p.before = rng.IntN(2) == 0
		p.noStart = i == 5
		p.start = 900
		if !p.before {
			p.start = 1000
		}
		if rng.IntN(3) == 0 {
			p.lag = int64(5 + rng.IntN(20)) // its exporter is behind: delivered that much later
		}
		// what it counted before the component started
		p.reqs = int64(rng.IntN(1000))
		p.lat = [4]uint64{uint64(rng.IntN(9)), 3, 2, 1}
		p.latSum = 100
		p.rpc = map[int32]uint64{2: 5}
		p.rpcCount, p.rpcSum = 5, 30
		if !p.before { // a run that starts while watched counts from zero
			p.reqs, p.lat, p.latSum, p.rpc, p.rpcCount, p.rpcSum = 0, [4]uint64{}, 0, map[int32]uint64{}, 0, 0
		}
		m.pods = append(m.pods, p)
	}
	type export struct {
		deliver int64
		points  []inPoint
	}
	var exports []export
	for _, p := range m.pods {
		for t := int64(1001 + rng.IntN(3)); t < 1100; t += int64(1 + rng.IntN(4)) {
			exports = append(exports, export{t + p.lag, m.export(rng, p, t)})
		}
	}
	sort.SliceStable(exports, func(i, j int) bool { return exports[i].deliver < exports[j].deliver })
	for lo := 0; lo < len(exports); {
		hi := min(len(exports), lo+1+rng.IntN(4))
		b := modelBatch{at: exports[hi-1].deliver}
		for _, e := range exports[lo:hi] {
			b.points = append(b.points, e.points...)
		}
		m.batches = append(m.batches, b)
		if rng.IntN(10) == 0 { // an exporter's retry: the same batch again
			m.batches = append(m.batches, modelBatch{at: b.at, points: b.points, resend: true})
		}
		lo = hi
	}
	return m
}

// countResends adds the resent batches to the model: with dedup, the points whose first copy was
// aggregated are duplicates (returned), the others have the outcome their first copy had again;
// without dedup, gauges and deltas count again and cumulative points are out of order.
func (m *modelRun) countResends(dedup bool) (duplicates int64) {
	for _, b := range m.batches {
		if b.resend {
			duplicates += m.resend(b, dedup)
		}
	}
	return duplicates
}

func (m *modelRun) resend(b modelBatch, dedup bool) (duplicates int64) {
	aggOf := map[string]string{"reqs": "reqs", "depth": "depth", "bytes": "bytes", "lat": "lat", "lat_delta": "lat", "rpc": "rpc"}
	for _, p := range b.points {
		if dedup {
			if p.again == "" {
				duplicates++
			} else {
				m.count(aggOf[p.metric], p.again, 1)
			}
			continue
		}
		win, svc := p.t/10*10, "service.name="+p.service+"(Str)"
		switch p.kind {
		case inGauge:
			m.want.addValue("depth", svc, p.pod, win, p.v)
			m.count("depth", "aggregated", 1)
		case inDeltaSum:
			m.want.add("bytes", "", win, 1, p.v, nil)
			m.count("bytes", "aggregated", 1)
		case inHistogram:
			if p.hist.count == 0 {
				m.count("lat", "empty", 1)
				continue
			}
			buckets := map[int32]uint64{}
			for i, c := range p.hist.buckets {
				buckets[int32(i)] = c
			}
			m.want.add("lat", svc, win, p.hist.count, p.hist.sum, buckets)
			m.count("lat", "aggregated", 1)
		default:
			m.count(aggOf[p.metric], "out_of_order", 1)
		}
	}
	return duplicates
}

func modelMetricsConfig(temporality Temporality, late LateFirings) *Config {
	cfg := baseConfig()
	cfg.Temporality, cfg.LateFirings = temporality, late
	cfg.AllowedLateness = time.Minute
	cfg.SeriesExpiration = time.Hour
	byService := keys("service.name")
	names := func(n ...string) *WhereConfig { return &WhereConfig{MetricNames: n} }
	cfg.Aggregations = []AggregationConfig{
		{Name: "reqs", Signal: "metrics", Where: names("reqs"), GroupBy: byService, Outputs: []string{"count", "sum"}},
		{Name: "depth", Signal: "metrics", Where: names("depth"), GroupBy: byService,
			Outputs: []string{"count", "sum", "min", "max", "stddev", "rate", "distinct:k8s.pod.name"}},
		{Name: "bytes", Signal: "metrics", Where: names("bytes"), Outputs: []string{"count", "sum"}},
		{Name: "lat", Signal: "metrics", Where: names("lat", "lat_delta"), GroupBy: byService, Outputs: []string{"count", "sum", "histogram"},
			Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{1, 5, 10}}}},
		{Name: "rpc", Signal: "metrics", Where: names("rpc"), Outputs: []string{"count", "sum", "histogram"}},
		{Name: "closer", Signal: "metrics", Where: names("closer")},
	}
	return cfg
}

// gotModelCells reads the component's results as the model's cells: with delta points, per window
// (first and late firings added up) and per series; with cumulative ones, the series' last point as
// its total. Gauges (min, max) are the last firing's of each window.
func gotModelCells(all []pmetric.Metrics, cumulative bool) modelCells {
	got := modelCells{}
	lastEnd := map[string]int64{}
	for _, p := range points(all) {
		agg, out, _ := cutLast(p.metric)
		if a, ok := strings.CutSuffix(p.metric, ".distinct.k8s.pod.name"); ok {
			agg, out = a, "distinct"
		}
		cell := func(w int64) *modelCell2 { return got.at(agg, p.attrs, w) }
		switch out {
		case "min", "max", "stddev", "rate", "distinct": // the last firing's of each window
			c := cell(p.start)
			switch out {
			case "min":
				c.min = p.value
			case "max":
				c.max = p.value
			case "stddev":
				c.stddev = p.value
			case "rate":
				c.rate = p.value
			default:
				c.nPods = p.value
			}
			c.hasValues = true
			continue
		case "count", "sum":
		default:
			continue
		}
		if cumulative {
			k := agg + "|" + p.attrs + "|" + out
			if p.end < lastEnd[k] {
				continue
			}
			lastEnd[k] = p.end
			c := cell(-1)
			if out == "count" {
				c.count = uint64(p.value)
			} else {
				c.sum = p.value
			}
			continue
		}
		for _, w := range []int64{p.start, -1} {
			if out == "count" {
				cell(w).count += uint64(p.value)
			} else {
				cell(w).sum += p.value
			}
		}
	}
	histEnd := map[string]int64{}
	eachMetric(all, func(_ pcommon.Resource, m pmetric.Metric) {
		agg, _, _ := cutLast(m.Name())
		addBuckets := func(attrs string, start, end int64, counts map[int32]uint64) {
			if cumulative {
				k := agg + "|" + attrs
				if end < histEnd[k] {
					return
				}
				histEnd[k] = end
				got.at(agg, attrs, -1).buckets = counts
				return
			}
			for _, w := range []int64{start, -1} {
				for i, c := range counts {
					got.at(agg, attrs, w).buckets[i] += c
				}
			}
		}
		switch m.Type() {
		case pmetric.MetricTypeHistogram:
			for i := 0; i < m.Histogram().DataPoints().Len(); i++ {
				dp := m.Histogram().DataPoints().At(i)
				counts := map[int32]uint64{}
				for j, c := range dp.BucketCounts().All() {
					counts[int32(j)] = c
				}
				addBuckets(attrString(dp.Attributes()), int64(dp.StartTimestamp())/s, int64(dp.Timestamp())/s, counts)
			}
		case pmetric.MetricTypeExponentialHistogram:
			for i := 0; i < m.ExponentialHistogram().DataPoints().Len(); i++ {
				dp := m.ExponentialHistogram().DataPoints().At(i)
				counts := map[int32]uint64{}
				shift := uint(-dp.Scale()) // the model's buckets are at scale 0: the output's can only be coarser
				for j, c := range dp.Positive().BucketCounts().All() {
					if c > 0 && shift == 0 {
						counts[dp.Positive().Offset()+int32(j)] += c
					} else if c > 0 {
						counts[-1000] += c // coarser than the model: counted apart, and reported
					}
				}
				addBuckets(attrString(dp.Attributes()), int64(dp.StartTimestamp())/s, int64(dp.Timestamp())/s, counts)
			}
		}
	})
	return got
}

// cutLast splits name at its last dot.
func cutLast(name string) (string, string, bool) {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

func TestMetricPointsMatchReferenceModel(t *testing.T) {
	modes := []struct {
		temporality Temporality
		late        LateFirings
	}{{temporalityDelta, lateRevise}, {temporalityDelta, lateFold}, {temporalityCumulative, lateFold}}
	for seed := range uint64(30) {
		mode := modes[seed%3]
		form := forms[(seed/3)%2]
		restart := seed%4 == 1
		// Early results every 3 s of the 10 s windows, where the model compares the totals (not
		// with revise): the points of a window still add up to its total, and the last cumulative
		// point is the total.
		early := mode.late != lateRevise && seed%2 == 1
		t.Run(fmt.Sprintf("seed=%d/%s/%s-%s/restart=%v/early=%v", seed, form, mode.temporality, mode.late, restart, early), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 29))
			m := newModelRun(rng)
			cfg := modelMetricsConfig(mode.temporality, mode.late)
			if early {
				cfg.Window.EarlyResults = 3 * time.Second
			}
			cfg.Dedup.Enabled = seed%5 != 0
			if restart { // the upstream's replay after the restart: the batch before it again
				i := len(m.batches) / 2
				m.batches = slices.Insert(m.batches, i, modelBatch{at: m.batches[i-1].at, points: m.batches[i-1].points, resend: true})
			}
			wantDuplicates := m.countResends(cfg.Dedup.Enabled)
			var host hostWith
			if restart {
				st := &memStorage{data: map[string][]byte{}}
				host = hostWith{storageID: st}
				cfg.Storage = &storageID
			}
			var all []pmetric.Metrics
			var runs []*metricsRun
			r := startMetrics(t, form, cfg, host)
			runs = append(runs, r)
			for i, b := range m.batches {
				if restart && i == len(m.batches)/2 {
					r.stop()
					all = append(all, r.results.AllMetrics()...)
					r = startMetrics(t, form, cfg, host)
					runs = append(runs, r)
				}
				r.at(max(b.at, 1000))
				r.send(inMetrics(b.points...))
			}
			// A point far ahead fires every window, and with cumulative points takes every series to
			// its last point.
			r.at(1300)
			r.send(inMetrics(inPoint{service: "z", pod: "z", metric: "closer", kind: inGauge, t: 1290, v: 1}))
			r.stop()
			all = append(all, r.results.AllMetrics()...)
			got := gotModelCells(all, mode.temporality == temporalityCumulative)
			var bad []string
			for k, w := range m.want {
				var agg, series string
				var window int64
				parseCellKey(k, &agg, &series, &window)
				if window != -1 && mode.late != lateRevise {
					continue // late records move to a later point: the totals are compared
				}
				g := got[k]
				if g == nil {
					g = &modelCell2{buckets: map[int32]uint64{}}
				}
				if g.count != w.count || math.Abs(g.sum-w.sum) > 1e-9*math.Abs(w.sum) {
					bad = append(bad, fmt.Sprintf("%s: count %d sum %v, want %d %v", k, g.count, g.sum, w.count, w.sum))
				}
				if (agg == "lat" || agg == "rpc") && !sameCounts(g.buckets, w.buckets) {
					bad = append(bad, fmt.Sprintf("%s: buckets %v, want %v", k, g.buckets, w.buckets))
				}
				if agg == "depth" && window != -1 && (g.min != w.min || g.max != w.max) {
					bad = append(bad, fmt.Sprintf("%s: min %v max %v, want %v %v", k, g.min, g.max, w.min, w.max))
				}
				if agg == "depth" && window != -1 {
					// stddev by two passes over the window's values; rate, their sum per second of
					// the 10 s window; the distinct pods that sent them.
					var mean, m2 float64
					for _, v := range w.values {
						mean += v / float64(len(w.values))
					}
					for _, v := range w.values {
						m2 += (v - mean) * (v - mean)
					}
					stddev := math.Sqrt(m2 / float64(len(w.values)))
					if math.Abs(g.stddev-stddev) > 1e-9*(1+stddev) || math.Abs(g.rate-w.sum/10) > 1e-9*(1+w.sum) || g.nPods != float64(len(w.pods)) {
						bad = append(bad, fmt.Sprintf("%s: stddev %v rate %v pods %v, want %v %v %d", k, g.stddev, g.rate, g.nPods, stddev, w.sum/10, len(w.pods)))
					}
				}
			}
			for k, g := range got {
				var agg, series string
				var window int64
				parseCellKey(k, &agg, &series, &window)
				if w := m.want[k]; w == nil && agg != "closer" && (g.count > 0 || g.sum != 0) && (window == -1 || mode.late == lateRevise) {
					bad = append(bad, fmt.Sprintf("%s: count %d sum %v, the model has nothing", k, g.count, g.sum))
				}
			}
			for agg, outcomes := range m.outcomes {
				for outcome, want := range outcomes {
					var n int64
					for _, run := range runs {
						n += pointsCounter(t, run.tel, agg, outcome)
					}
					if n != want {
						bad = append(bad, fmt.Sprintf("metric_points{%s, %s} = %d, want %d", agg, outcome, n, want))
					}
				}
			}
			var duplicates int64
			for _, run := range runs {
				duplicates += counterValue(t, run.tel, "otelcol_window_aggregator_duplicate_records", map[string]string{"signal": "metrics"})
			}
			if duplicates != wantDuplicates {
				bad = append(bad, fmt.Sprintf("duplicate_records{metrics} = %d, want %d", duplicates, wantDuplicates))
			}
			sort.Strings(bad)
			if len(bad) > 0 {
				if len(bad) > 15 {
					bad = append(bad[:15], fmt.Sprintf("... %d more", len(bad)-15))
				}
				t.Fatalf("%d differences:\n  %s", len(bad), strings.Join(bad, "\n  "))
			}
		})
	}
}

func parseCellKey(k string, agg, series *string, window *int64) {
	var i, j int
	for i = 0; k[i] != '|'; i++ {
	}
	for j = len(k) - 1; k[j] != '|'; j-- {
	}
	*agg, *series = k[:i], k[i+1:j]
	_, _ = fmt.Sscan(k[j+1:], window)
}

// sameCounts compares bucket counts, a missing bucket counting as 0.
func sameCounts(a, b map[int32]uint64) bool {
	for i, c := range a {
		if b[i] != c {
			return false
		}
	}
	for i, c := range b {
		if a[i] != c {
			return false
		}
	}
	return true
}
