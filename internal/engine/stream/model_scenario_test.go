package stream

// The streams the reference model (model_test.go) and the engine are run on: the configurations, the
// generation of a random stream for a configuration and seed, running a stream against the engine
// step by step, shrinking a failing stream and reporting it, and running the seeds of a configuration.

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// Configurations and streams.

type modelConfig struct {
	name                                        string
	size, slide, lateness, ooo, idle, skew      time.Duration
	offset                                      time.Duration // windows start at offset + k × slide
	aggs                                        []Aggregation
	keys                                        int
	emptyKey                                    bool  // one of the keys is ""
	base                                        int64 // wall clock at the start, Unix ns; 0: a random one in the 2020s
	seeds, ops                                  int
	maxBatch                                    int // records per batch, at most; 0: 20
	shards                                      int
	maxSeries                                   int     // 0: large (no overflow)
	snapBeforeCollectRate, snapAfterCollectRate float64 // snapshot test only

	// lead is how far event times run ahead of the wall clock at most, in the stretches where they do
	// (0: never; then they lag behind it by up to size).
	lead time.Duration
	// clockKeepsUp: every Collect is at or after the greatest accepted event time on the wall clock,
	// so that W never waits for the clock and moves only at End and Collect, never at a Begin.
	clockKeepsUp bool

	// weights: records weigh from 1 to about a million (see genWeight), not 1 each.
	weights bool
	// dists: about one record in four is a distribution of a few values (see genDist).
	dists bool

	perSource  bool
	sourceIdle time.Duration
	maxSources int
	// sources is the number of sources the stream's records come from (per_source only); each lags
	// behind the wall clock by up to sourceLag more than the stream does, and at times falls silent.
	sources   int
	sourceLag time.Duration
}

func (c *modelConfig) slideOrSize() time.Duration {
	if c.slide == 0 {
		return c.size
	}
	return c.slide
}

func (c *modelConfig) engineConfig(clk clock.Clock) Config {
	aggs := slices.Clone(c.aggs)
	for i := range aggs {
		aggs[i].MaxSeries = 1 << 20
		if c.maxSeries > 0 {
			aggs[i].MaxSeries = c.maxSeries
		}
	}
	return Config{Size: c.size, Slide: c.slide, Offset: c.offset, MaxOutOfOrderness: c.ooo, IdleTimeout: c.idle,
		MaxFutureSkew: c.skew, AllowedLateness: c.lateness, Aggregations: aggs, shards: c.shards, Clock: clk,
		PerSource: c.perSource, SourceIdleTimeout: c.sourceIdle, MaxSources: c.maxSources}
}

func (c *modelConfig) String() string {
	s := fmt.Sprintf("%s: size=%v slide=%v offset=%v lateness=%v maxOutOfOrderness=%v idle=%v maxFutureSkew=%v aggs=%+v shards=%d maxSeries=%d",
		c.name, c.size, c.slideOrSize(), c.offset, c.lateness, c.ooo, c.idle, c.skew, c.aggs, c.shards, c.maxSeries)
	if c.perSource {
		s += fmt.Sprintf(" perSource sourceIdle=%v maxSources=%d sources=%d", c.sourceIdle, c.maxSources, c.sources)
	}
	if c.weights {
		s += " weighted"
	}
	if c.dists {
		s += " distributions"
	}
	return s
}

var fullQuantiles = []float64{0.5, 0.9, 0.99, 0.999}

// realNow is a wall clock in the 2020s, so that windows, ids and the engine's internal infinities are
// exercised at realistic magnitudes.
const realNow = int64(1_700_000_000) * int64(time.Second)

// modelConfigs are the configurations of the model tests; about half of them weigh their records (see
// genWeight), the others count each record once, and some of the weighted ones take distributions
// (see genDist).
func modelConfigs() []modelConfig {
	s := time.Second
	return []modelConfig{
		{name: "tumbling10s", size: 10 * s, skew: 30 * s, keys: 4, seeds: 40, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		{name: "tumbling10s-late-ooo-idle", weights: true, dists: true, size: 10 * s, slide: 10 * s, lateness: 5 * s, ooo: 2 * s, idle: 15 * s,
			skew: 30 * s, keys: 8, emptyKey: true, seeds: 40, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {Accumulators: []AccumulatorKind{SpreadKind, DistinctKind(0)}}}},
		{name: "tumbling1s-3aggs", weights: true, dists: true, size: s, lateness: 2 * s, ooo: s / 2, idle: 3 * s, skew: 30 * s, keys: 3,
			seeds: 40, ops: 40, shards: 1,
			aggs: []Aggregation{{Histogram: true}, {Quantiles: []float64{0, 0.25, 1}}, {}}},
		{name: "sliding4s/1s", size: 4 * s, slide: s, ooo: s, skew: 30 * s, keys: 5, seeds: 40, ops: 24,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		{name: "sliding4s/1s-late-idle-3aggs", weights: true, dists: true, size: 4 * s, slide: s, lateness: 2500 * time.Millisecond, idle: 5 * s,
			skew: 30 * s, keys: 12, seeds: 40, ops: 30,
			aggs: []Aggregation{{Quantiles: fullQuantiles}, {Histogram: true}, {Accumulators: []AccumulatorKind{DistinctKind(0), SpreadKind}}}},
		{name: "sliding60s/1s", size: 60 * s, slide: s, lateness: 10 * s, ooo: 5 * s, idle: 20 * s, skew: 30 * s,
			keys: 12, seeds: 8, ops: 20,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "sliding10s/2.5s-near-epoch", weights: true, dists: true, size: 10 * s, slide: 2500 * time.Millisecond, lateness: 5 * s,
			ooo: s, idle: 4 * s, skew: 5 * s, keys: 4, base: int64(12 * s), seeds: 40, ops: 20,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		// Many records per series and batch, out of order over a few panes: a series' head moves from
		// pane to pane, taking and putting back totals and pending values (TestFullPendingValues...
		// fills one).
		{name: "sliding4s/1s-dense", weights: true, dists: true, size: 4 * s, slide: s, ooo: s, skew: 30 * s, keys: 2,
			maxBatch: 300, seeds: 24, ops: 16,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {Accumulators: []AccumulatorKind{SpreadKind, DistinctKind(0)}}}},
		// Windows moved off the epoch's multiples: back by 3 s (starting at 7 s past a multiple of 10),
		// and forward by 1 s with a 2.5 s slide near the epoch.
		{name: "tumbling10s-offset-3s", weights: true, dists: true, size: 10 * s, offset: -3 * s, lateness: 5 * s, ooo: 2 * s, idle: 15 * s,
			skew: 30 * s, keys: 6, seeds: 30, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "sliding10s/2.5s-offset1s-near-epoch", size: 10 * s, slide: 2500 * time.Millisecond, offset: s, lateness: 5 * s,
			ooo: s, idle: 4 * s, skew: 5 * s, keys: 4, base: int64(12 * s), seeds: 30, ops: 20,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		{name: "sliding40ns/10ns", weights: true, size: 40, slide: 10, lateness: 25, ooo: 7, idle: 50, skew: 30, keys: 4,
			seeds: 40, ops: 24,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {Quantiles: []float64{0.5}}}},
		// Event times run ahead of the wall clock in stretches, within max_future_skew: W is held at
		// now - max_out_of_orderness and windows fire as the clock moves.
		{name: "tumbling10s-ahead", weights: true, size: 10 * s, lateness: 5 * s, ooo: 2 * s, skew: 60 * s, lead: 45 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		{name: "sliding4s/1s-ahead-idle", size: 4 * s, slide: s, lateness: 2 * s, idle: 5 * s, skew: 20 * s,
			lead: 15 * s, keys: 4, seeds: 30, ops: 30,
			aggs: []Aggregation{{Quantiles: fullQuantiles}, {}}},
		// per_source: a few sources, some tens of seconds behind the others, some silent for longer
		// than source_idle_timeout at times.
		{name: "per-source", size: 10 * s, lateness: 5 * s, ooo: s, skew: 30 * s, lead: 10 * s,
			perSource: true, sourceIdle: 20 * s, maxSources: 8, sources: 4, sourceLag: 90 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}, {}}},
		{name: "per-source-idle", weights: true, dists: true, size: 10 * s, slide: 5 * s, lateness: 5 * s, idle: 15 * s, skew: 30 * s, lead: 10 * s,
			perSource: true, sourceIdle: 30 * s, maxSources: 16, sources: 4, sourceLag: 60 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Quantiles: fullQuantiles, Histogram: true}}},
		// More sources than max_sources: the ones past it count in the shared source.
		{name: "per-source-max2", size: 10 * s, lateness: 5 * s, ooo: 2 * s, skew: 30 * s, lead: 5 * s,
			perSource: true, sourceIdle: 20 * s, maxSources: 2, sources: 5, sourceLag: 60 * s,
			keys: 4, seeds: 30, ops: 40,
			aggs: []Aggregation{{Histogram: true}, {}}},
	}
}

type scenOp struct {
	batchNow, collectNow int64
	recs                 []refRec
	snapBeforeCollect    bool // snapshot test: Snapshot and Restore between End and Collect
	snapAfterCollect     bool // snapshot test: Snapshot and Restore after Collect
	// restoreAt is the wall time of the Restore after Collect, at or after collectNow: the collector
	// was not running in between.
	restoreAt int64
}

type scenario struct {
	cfg  *modelConfig
	seed uint64
	base int64
	ops  []scenOp
}

func (sc *scenario) withOps(ops []scenOp) *scenario {
	c := *sc
	c.ops = ops
	return &c
}

func (sc *scenario) records() int {
	n := 0
	for _, op := range sc.ops {
		n += len(op.recs)
	}
	return n
}

func randIn(rng *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + rng.Int64N(hi-lo+1)
}

func hashName(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// genValue draws a value: mostly log-uniform over [1e-3, 3.6e6], with NaN, infinities, zero, negatives
// and repeats.
func genValue(rng *rand.Rand, prev []float64, nanPct int) float64 {
	r := rng.IntN(100)
	switch {
	case r < nanPct:
		return math.NaN()
	case r < nanPct+1:
		return math.Inf(1)
	case r < nanPct+2:
		return math.Inf(-1)
	case r < nanPct+4:
		return 0
	case r < nanPct+7:
		return -math.Exp(math.Log(1e-3) + rng.Float64()*(math.Log(3.6e6)-math.Log(1e-3)))
	case r < nanPct+12 && len(prev) > 0:
		return prev[rng.IntN(len(prev))]
	}
	return math.Exp(math.Log(1e-3) + rng.Float64()*(math.Log(3.6e6)-math.Log(1e-3)))
}

// genWeight draws a record's weight: mostly 1 (as 0 or 1: both mean one record), else a sampled
// span's adjusted count (2, 4, 10, 1000), a small or a large one.
func genWeight(rng *rand.Rand) uint32 {
	switch r := rng.IntN(100); {
	case r < 40:
		return uint32(rng.IntN(2))
	case r < 60:
		return []uint32{2, 4, 10, 1000}[rng.IntN(4)]
	case r < 95:
		return uint32(2 + rng.IntN(9))
	default:
		return uint32(1 + rng.IntN(1<<20))
	}
}

// genDist draws a distribution record's values: one to six finite ones, and whether it leaves out
// its min and max (one in three).
func genDist(rng *rand.Rand, prev []float64) ([]float64, bool) {
	vs := make([]float64, 1+rng.IntN(6))
	for i := range vs {
		for vs[i] = genValue(rng, prev, 0); !finite(vs[i]); vs[i] = genValue(rng, prev, 0) {
		}
	}
	return vs, rng.IntN(3) == 0
}

// genScenario draws a stream for c. It runs a quiet model alongside to aim records at the watermark:
// late ones, too-late ones, ones on window boundaries.
func genScenario(c *modelConfig, seed uint64) *scenario {
	rng := rand.New(rand.NewPCG(seed, hashName(c.name)))
	m := newRefModel(c)
	m.quiet = true
	size, slide, late, ooo, idle, skew := int64(c.size), int64(c.slideOrSize()), int64(c.lateness), int64(c.ooo), int64(c.idle), int64(c.skew)
	off := int64(c.offset)
	// paneStart is the start of the window pane holding t: the times generated near window starts
	// are near the configured ones.
	paneStart := func(t int64) int64 { return t - mod(t-off, slide) }
	base := c.base
	if base == 0 {
		base = realNow + randIn(rng, 0, 1000)*int64(time.Second) + randIn(rng, 0, 3)*slide/3
	}
	sc := &scenario{cfg: c, seed: seed, base: base}
	keys := make([]string, c.keys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		// Keys around the length a series holds in itself: at it, and one byte and more beyond.
		switch i % 4 {
		case 2:
			keys[i] += strings.Repeat(".", inlineKeyLen-len(keys[i]))
		case 3:
			keys[i] += strings.Repeat("-", inlineKeyLen+1-len(keys[i])+i%7)
		}
	}
	if c.emptyKey {
		keys[0] = ""
	}
	now := base
	// lag is how far the stream's event times are behind the wall clock; negative: ahead of it.
	drawLag := func() int64 {
		if c.lead > 0 && rng.IntN(2) == 0 {
			return -randIn(rng, 1, int64(c.lead))
		}
		return randIn(rng, 0, size)
	}
	lag := drawLag()
	redraw := 40
	if c.lead > 0 {
		redraw = 6 // switch between running behind and ahead of the clock within a stream
	}
	nanPct := 5 + rng.IntN(10)
	var prev []float64
	// With per_source: each source's lag behind the stream, and the wall time it is silent until.
	srcNames := make([]string, c.sources)
	srcLag := make([]int64, c.sources)
	silentUntil := make([]int64, c.sources)
	drawSrcLag := func(i int) int64 {
		if i == 0 || rng.IntN(2) == 0 {
			return randIn(rng, 0, int64(time.Second))
		}
		return randIn(rng, 10*int64(time.Second), int64(c.sourceLag))
	}
	for i := range srcNames {
		srcNames[i] = "s" + strconv.Itoa(i)
		srcLag[i] = drawSrcLag(i)
	}
	nOps := c.ops/2 + rng.IntN(c.ops)
	for range nOps {
		// advance the wall clock
		switch r := rng.IntN(100); {
		case r < 15:
		case r < 80:
			now += randIn(rng, 1, 2*slide)
		case r < 92:
			now += randIn(rng, size, 3*size)
		case idle > 0:
			now += randIn(rng, idle, 2*idle)
		default:
			now += randIn(rng, 0, 5*size)
		}
		if rng.IntN(redraw) == 0 {
			lag = drawLag()
		}
		var active []int // the sources not silent now
		for i := range srcNames {
			if rng.IntN(20) == 0 {
				srcLag[i] = drawSrcLag(i)
			}
			if rng.IntN(25) == 0 { // silent for about source_idle_timeout, often longer
				silentUntil[i] = now + randIn(rng, int64(c.sourceIdle)/2, 3*int64(c.sourceIdle))
			}
			if silentUntil[i] <= now {
				active = append(active, i)
			}
		}
		op := scenOp{batchNow: now}
		n := 1 + rng.IntN(cmp.Or(c.maxBatch, 20))
		if rng.IntN(20) == 0 || (c.sources > 0 && len(active) == 0) {
			n = 0
		}
		b := m.begin(now)
		streamFrontier := now - lag
		if b.wSet && b.w-slide > streamFrontier { // W is ahead of the stream: keep most records relevant
			streamFrontier = b.w - slide
		}
		for range n {
			frontier, src := streamFrontier, ""
			if c.sources > 0 {
				i := active[rng.IntN(len(active))]
				frontier, src = streamFrontier-srcLag[i], srcNames[i]
				b.source(src)
			}
			var t int64
			anchor := frontier
			if b.wSet {
				anchor = b.w
			}
			switch r := rng.IntN(100); {
			case r < 50: // around the frontier, out of order within max_out_of_orderness and a bit more
				t = frontier + randIn(rng, -ooo-slide, slide)
			case r < 65: // around W: on time, late or too late
				t = anchor + randIn(rng, -(size+late+2*slide), ooo+slide/2)
			case r < 77: // on a window boundary, or one that End will turn into W
				s := paneStart(anchor) + randIn(rng, -(size+late)/slide-1, 1)*slide
				if rng.IntN(2) == 0 {
					s += ooo
				}
				t = s + randIn(rng, -1, 1)
			case r < 82: // the future, or just not
				t = now + skew + randIn(rng, 0, 2)
				if rng.IntN(2) == 0 {
					t = now + skew + randIn(rng, 1, slide)
				}
			case r < 85: // invalid
				t = -randIn(rng, 0, 2)
			case r < 90: // long expired
				t = anchor - size - late - randIn(rng, 0, 3*size)
			case r < 91: // ahead of the wall clock, within the skew: W follows the clock up to it
				t = now + randIn(rng, 0, min(skew, 3*size))
			default: // near the frontier, exact multiples of the slide
				t = paneStart(frontier) + randIn(rng, -2, 1)*slide
			}
			agg := rng.IntN(len(c.aggs))
			key := keys[min(rng.IntN(len(keys)), rng.IntN(len(keys)))]
			v := genValue(rng, prev, nanPct)
			if finite(v) {
				prev = append(prev, v)
			}
			rec := refRec{agg: agg, key: key, t: t, v: v, src: src, id: recIDOf(v)}
			if c.weights {
				rec.w = genWeight(rng)
			}
			if c.dists && rng.IntN(4) == 0 {
				rec.dist, rec.noMinMax = genDist(rng, prev)
			}
			b.addRec(rec)
			op.recs = append(op.recs, rec)
		}
		b.end()
		// the Collect after the batch, sometimes later on the wall clock
		op.collectNow = now
		switch r := rng.IntN(100); {
		case r < 70:
		case r < 82:
			op.collectNow += randIn(rng, 1, slide)
		case r < 92 && idle > 0 && m.idleArmed:
			// aim the idle rule at a window end or expiry boundary, give or take 1 ns
			target := paneStart(m.wLast) + randIn(rng, 1, 3)*slide + randIn(rng, -1, 1)
			if rng.IntN(2) == 0 {
				target += late
			}
			at := m.lastAcceptWall + (target - m.wLast)
			if at >= now && at-m.lastAcceptWall >= idle {
				op.collectNow = at
			}
		default:
			if idle > 0 {
				op.collectNow += randIn(rng, idle/2, 2*idle)
			} else {
				op.collectNow += randIn(rng, 0, size)
			}
		}
		if c.clockKeepsUp && m.anyAccepted {
			op.collectNow = max(op.collectNow, m.maxEver)
		}
		m.collect(op.collectNow)
		now = op.collectNow
		op.snapBeforeCollect = rng.Float64() < c.snapBeforeCollectRate
		op.snapAfterCollect = rng.Float64() < c.snapAfterCollectRate
		if op.snapAfterCollect {
			// Sometimes the collector is down for a while before the Restore.
			op.restoreAt = now
			if rng.IntN(2) == 0 {
				op.restoreAt += randIn(rng, 1, 2*max(idle, int64(c.sourceIdle), size))
			}
			m.snapshot(now)
			m.restore(op.restoreAt)
			now = op.restoreAt
		}
		sc.ops = append(sc.ops, op)
	}
	return sc
}
