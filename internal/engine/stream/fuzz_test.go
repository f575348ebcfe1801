package stream

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// FuzzIngest decodes its input into a configuration (a first byte of 0x80 and up picks one with
// per-source tracking, whose records then name their sources) and a sequence of operations (batches
// of records, mostly behind the wall clock and some ahead of it, Collects and clock moves,
// Snapshot+Restore, with per-source tracking after some downtime, damaged snapshots), some records
// weighted (a sampled span standing for 2 to 2^20 records), and checks, whatever the input:
//   - nothing panics, and every record gets a valid Verdict: the one the contract gives for the record
//     against the watermark of its batch's Begin (as the reference model computes it);
//   - Watermark() is the model's W after every operation, and never moves back; SetSource reports the
//     shared source where the model does;
//   - every firing is well formed (its window's geometry, Count > 0, consistent value counts, quantiles
//     within [Min, Max], Hist present as configured and counting ValueCount values, a max exemplar
//     only with exemplars and values, at most Max, and at most the configured exemplars on a point,
//     each a finite value within the point's), and a window has at most one first firing;
//   - accounting: after FireAll, the Counts of all firings of each window, summed over its series
//     (overflow included), equal the records added to it, each counted at its weight; no series is
//     left held;
//   - a truncated snapshot never restores, and a damaged one never makes Restore panic.
//
// Unlike TestEngineMatchesReferenceModel it does not Collect after every batch, so firings are also
// produced by flush points inside Apply and Snapshot.
func FuzzIngest(f *testing.F) {
	f.Add([]byte{0, 0, 5, 0x01, 0, 0, 20, 0x12, 10, 1, 30, 4, 40, 6, 7, 4, 250, 1, 3, 0x21, 0xf6, 2, 9})
	f.Add([]byte{0, 3, 5, 0x09, 0, 4, 20, 0x1a, 10, 5, 30, 4, 40, 6, 7, 4, 250, 0, 3, 0x29, 0xf6, 6, 9, 7})
	f.Add([]byte{1, 1, 4, 0x00, 0xf0, 0, 10, 0x11, 0x10, 0, 11, 0x22, 0x80, 3, 12, 4, 210, 6, 77, 3, 2, 0x31, 0xf4, 1, 0xff, 7})
	f.Add([]byte{2, 2, 8, 0x05, 100, 0, 0, 0x15, 0x90, 1, 1, 0x25, 0x8f, 4, 2, 0x35, 5, 0xf1, 3, 0x45, 0xc8, 0xf8, 4, 4, 230, 6, 128, 1, 3, 0x07, 0x81, 0xf7, 6})
	f.Add([]byte{3, 3, 6, 0x01, 1, 1, 8, 0x02, 0xff, 2, 9, 0x03, 2, 3, 10, 0x04, 0xfe, 4, 11, 0x05, 3, 0xfb, 12, 0x06, 0xfc, 0xfd, 13, 5, 40, 4, 255, 6, 200, 2, 3, 0x07, 0x80, 0xf2, 14, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		if msg := runFuzzOps(data); msg != "" {
			t.Fatalf("%s\ninput: %q", msg, data)
		}
	})
}

type fuzzSetup struct {
	cfg  Config
	unit int64 // the time step of the encoding
	base int64 // wall clock at the start
	// With per-source tracking: the number of sources, and how far each lags behind the one before.
	sources int
	srcLag  int64
}

func fuzzSetups() []fuzzSetup {
	s := time.Second
	q := []float64{0.5, 0.99}
	return []fuzzSetup{
		{Config{Size: 10 * s, MaxFutureSkew: 30 * s, Aggregations: []Aggregation{{MaxSeries: 100, Quantiles: q, Histogram: true}}},
			int64(2500 * time.Millisecond), realNow, 0, 0},
		{Config{Size: 10 * s, AllowedLateness: 5 * s, MaxOutOfOrderness: 2 * s, IdleTimeout: 10 * s, MaxFutureSkew: 30 * s, shards: 2,
			Aggregations: []Aggregation{{MaxSeries: 2, Histogram: true}, {MaxSeries: 100, Quantiles: []float64{0.9, 0, 1}}}},
			int64(2500 * time.Millisecond), realNow, 0, 0},
		{Config{Size: 4 * s, Slide: s, AllowedLateness: 3 * s, MaxOutOfOrderness: s, IdleTimeout: 5 * s, MaxFutureSkew: 20 * s, shards: 1,
			Aggregations: []Aggregation{{MaxSeries: 3, Quantiles: q, Histogram: true, Exemplars: 2}}},
			int64(500 * time.Millisecond), realNow, 0, 0},
		{Config{Size: 40, Slide: 10, AllowedLateness: 20, MaxOutOfOrderness: 5, IdleTimeout: 30, MaxFutureSkew: 100, shards: 4,
			Aggregations: []Aggregation{{MaxSeries: 2, Exemplars: 1}, {MaxSeries: 100, Quantiles: q, Histogram: true, Exemplars: 3}}},
			5, realNow, 0, 0},
		{Config{Size: 10 * s, Slide: 2500 * time.Millisecond, AllowedLateness: 5 * s, IdleTimeout: 4 * s, MaxFutureSkew: 5 * s,
			Aggregations: []Aggregation{{MaxSeries: 4, Quantiles: q, Histogram: true}}},
			int64(time.Second), int64(12 * s), 0, 0}, // near the epoch: negative window starts, t <= 0
	}
}

// fuzzSourceSetups are the setups with per-source tracking, chosen by a first byte of 0x80 and up.
func fuzzSourceSetups() []fuzzSetup {
	s := time.Second
	q := []float64{0.5, 0.99}
	return []fuzzSetup{
		{Config{Size: 10 * s, AllowedLateness: 5 * s, MaxOutOfOrderness: 2 * s, MaxFutureSkew: 30 * s,
			PerSource: true, SourceIdleTimeout: 30 * s, MaxSources: 8,
			Aggregations: []Aggregation{{MaxSeries: 100, Quantiles: q, Histogram: true}}},
			int64(2500 * time.Millisecond), realNow, 4, int64(20 * s)},
		{Config{Size: 4 * s, Slide: s, AllowedLateness: 3 * s, MaxOutOfOrderness: s, IdleTimeout: 5 * s, MaxFutureSkew: 20 * s,
			PerSource: true, SourceIdleTimeout: 10 * s, MaxSources: 2, shards: 1,
			Aggregations: []Aggregation{{MaxSeries: 3, Quantiles: q, Histogram: true}, {MaxSeries: 100}}},
			int64(500 * time.Millisecond), realNow, 5, int64(6 * s)},
	}
}

type fuzzReader struct{ b []byte }

func (r *fuzzReader) done() bool { return len(r.b) == 0 }

func (r *fuzzReader) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// fuzzKeys: short keys, and keys at and beyond the length a series holds in itself (inlineKeyLen).
var fuzzKeys = []string{"", "a", "b", "c", "d", "e", strings.Repeat("f", inlineKeyLen), strings.Repeat("g", inlineKeyLen+1)}

func fuzzValue(b byte) float64 {
	switch b {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3:
		return 0
	case 4:
		return math.Copysign(0, -1)
	case 5:
		return math.MaxFloat64
	case 6:
		return math.SmallestNonzeroFloat64
	case 7:
		return -math.MaxFloat64
	}
	v := math.Ldexp(1+float64(b&7)/8, int(b>>3)*3-40) // 2^-40 .. 2^53
	if b&8 != 0 {
		v = -v
	}
	return v
}

func runFuzzOps(data []byte) (msg string) {
	r := &fuzzReader{b: data}
	sel := r.next()
	setups := fuzzSetups()
	st := setups[int(sel)%len(setups)]
	if sel >= 0x80 {
		ps := fuzzSourceSetups()
		st = ps[int(sel-0x80)%len(ps)]
	}
	cfg := st.cfg
	size, slide := int64(cfg.Size), int64(cfg.Size)
	if cfg.Slide != 0 {
		slide = int64(cfg.Slide)
	}
	now := st.base
	clk := clock.NewFake(time.Unix(0, now)) // every engine's wall clock, moved with now
	newEngine := func() *Engine {
		c := cfg
		c.Clock = clk
		e, err := New(c)
		if err != nil {
			panic(err)
		}
		return e
	}
	e := newEngine()
	mc := &modelConfig{size: cfg.Size, slide: cfg.Slide, lateness: cfg.AllowedLateness, ooo: cfg.MaxOutOfOrderness,
		idle: cfg.IdleTimeout, skew: cfg.MaxFutureSkew, aggs: cfg.Aggregations,
		perSource: cfg.PerSource, sourceIdle: cfg.SourceIdleTimeout, maxSources: cfg.MaxSources}
	m := newRefModel(mc)
	m.quiet = true
	tf := timeFmt{st.base}

	carried := map[aggWin]uint64{}
	firsts := map[windowID]bool{}
	var verdicts [numVerdicts]uint64 // since the engine was made or restored
	var problems []string
	var onWindow func(*Result) // the checks of a window's firing, below
	var spans uint64           // records staged as spans
	onResult := func(res *Result) {
		a := cfg.Aggregations[res.Agg]
		if len(res.Point.Exemplars) > a.Exemplars || uint64(len(res.Point.Exemplars)) > res.Point.ValueCount {
			problems = append(problems, fmt.Sprintf("a point at %s with %d values has %d exemplars, %d configured",
				tf.t(res.End), res.Point.ValueCount, len(res.Point.Exemplars), a.Exemplars))
		}
		for _, ex := range res.Point.Exemplars {
			if !finite(ex.Value) || ex.Time >= res.End {
				problems = append(problems, fmt.Sprintf("a point at %s has exemplar %+v", tf.t(res.End), ex))
			}
		}
		if res.HasMaxExemplar && (a.Exemplars == 0 || !res.HasWindow || res.WindowValueCount == 0 || !(res.MaxExemplar.Value <= res.Max) ||
			res.MaxExemplar.Time < res.Start || res.MaxExemplar.Time >= res.End) {
			problems = append(problems, fmt.Sprintf("window [%s, %s) with max %g has max exemplar %+v",
				tf.t(res.Start), tf.t(res.End), res.Max, res.MaxExemplar))
		}
		onWindow(res)
	}
	onWindow = windowsOnly(func(res *Result) {
		f := firingFromResult(res)
		a := cfg.Aggregations[f.Agg]
		bad := func(what string) { problems = append(problems, what+": "+tf.firing(&f)) }
		carried[aggWin{f.Agg, f.Start}] += f.Count
		switch {
		case f.End-f.Start != size || mod(f.Start, slide) != 0:
			bad("window not aligned")
		case f.Count == 0:
			bad("firing without records")
		case f.ValueCount > f.Count || f.ValueCount > f.WindowValueCount:
			bad("value counts inconsistent")
		case !f.Late && f.ValueCount != f.WindowValueCount:
			bad("first firing whose value count is not the window's")
		case f.Overflow && f.Key != "":
			bad("overflow firing with a key")
		case f.HasHist != a.Histogram:
			bad("histogram presence")
		case f.HasHist && (f.HistCount != f.ValueCount || f.HistBuckets != f.HistCount):
			bad("histogram count")
		case f.WindowValueCount > 0 && len(f.Quantiles) != len(a.Quantiles):
			bad("quantile count")
		case f.WindowValueCount > 0 && !(f.Min <= f.Max):
			bad("min > max")
		}
		if f.WindowValueCount > 0 {
			for _, q := range f.Quantiles {
				if !(q >= f.Min && q <= f.Max) {
					bad("quantile outside [min, max]")
				}
			}
		}
		if !f.Late {
			if firsts[f.window()] {
				bad("second first firing of a window")
			}
			firsts[f.window()] = true
		}
	})
	lastW := int64(math.MinInt64)
	checkW := func(when string) {
		w, mw := e.Watermark(), m.watermarkAt(now)
		if w != mw {
			problems = append(problems, fmt.Sprintf("%s: Watermark() = %s, the model's W is %s", when, tf.t(w), tf.t(mw)))
		}
		if w < lastW {
			problems = append(problems, fmt.Sprintf("%s: watermark moved back from %s to %s", when, tf.t(lastW), tf.t(w)))
		}
		lastW = max(lastW, w)
	}
	advance := func(b byte) {
		if b < 200 {
			now += int64(b) * st.unit / 4
		} else {
			now += int64(b-199) * st.unit * 4
		}
		clk.Set(time.Unix(0, now))
	}
	records := 0
	for op := 0; op < 300 && !r.done() && len(problems) == 0; op++ {
		switch c := r.next(); c % 8 {
		case 0, 1, 2, 3: // a batch; with c%8 == 3 staged and applied at once, as the component does
			staged := c%8 == 3
			n := int(r.next()) % 17
			b := e.Begin(now)
			mb := m.begin(now)
			type pending struct {
				agg       int
				key       string
				t         int64
				v         float64
				got, want Verdict
			}
			var recs []pending
			src := -1
			for range n {
				kb, tb, jb, vb := r.next(), r.next(), r.next(), r.next()
				agg := int(kb>>4) % len(cfg.Aggregations)
				key := fuzzKeys[kb&7]
				// mostly behind the wall clock: from -40 to +31.75 units, give or take 2 ns
				t := now + (int64(int8(tb))-32)*st.unit/4 + int64(jb%5) - 2
				if st.sources > 0 {
					// the record's source, which lags behind the one before it
					if i := int(r.next()) % st.sources; i != src {
						src = i
						name := "src" + string(rune('0'+i))
						if got, want := b.SetSource([]byte(name)), mb.source(name); got != want {
							problems = append(problems, fmt.Sprintf("op %d: SetSource(%q) reported shared=%v, the model says %v", op, name, got, want))
						}
					}
					t -= int64(src) * st.srcLag
				}
				switch jb {
				case 240:
					t = 0
				case 241:
					t = -1
				case 242:
					t = 1
				case 243:
					t = now + int64(cfg.MaxFutureSkew)
				case 244:
					t = now + int64(cfg.MaxFutureSkew) + 1
				case 245:
					t = math.MaxInt64
				case 246:
					t = math.MinInt64
				case 247, 248, 249: // on a window boundary near the watermark, give or take 1 ns
					w := m.watermark()
					if w == math.MinInt64 {
						w = now
					}
					t = w - mod(w, slide) + int64(int8(tb))%8*slide + int64(jb) - 248
				}
				rec := refRec{agg: agg, key: key, t: t, v: fuzzValue(vb)}
				if kb&8 != 0 { // a weighted record: bit 3 of the key byte, which picks no key
					rec.w = fuzzWeights[int(jb)%len(fuzzWeights)]
					if jb%4 == 0 { // or a distribution, of the finite ones of a few values
						rec.dist, rec.noMinMax = fuzzDist(vb, tb, jb), jb&16 != 0
					}
				}
				p := pending{agg: agg, key: key, t: t, v: rec.v}
				if staged { // a span (see spanOf), which aggregations with exemplars take as one
					spans++
					p.got = stageSpan(b, &rec, int32(len(recs)), spans)
				} else {
					p.got = addRec(b, &rec, []byte(key))
				}
				p.want = mb.addRec(rec)
				recs = append(recs, p)
			}
			if staged {
				b.Apply(func(tag int32, vd Verdict, _ int64) { recs[tag].got = vd })
			}
			for _, p := range recs {
				if p.got != p.want {
					problems = append(problems, fmt.Sprintf("op %d: record(%d, %q, %s, %g) = %v, want %v (staged %v, W at Begin %s)",
						op, p.agg, p.key, tf.t(p.t), p.v, p.got, p.want, staged, tf.t(mb.watermarkOrInf())))
				}
				if p.got < numVerdicts {
					verdicts[p.got]++
				}
				records++
			}
			b.End()
			mb.end()
			checkW(fmt.Sprintf("op %d (batch End)", op))
		case 4: // clock moves, then Collect
			advance(r.next())
			e.Collect(now, onResult)
			m.collect(now)
			checkW(fmt.Sprintf("op %d (Collect)", op))
		case 5: // the clock moves
			advance(r.next())
		case 6: // Snapshot, Restore into a fresh engine; damaged copies must not restore
			cb, fb := r.next(), r.next()
			snap := e.Snapshot(nil)
			m.snapshot(now)
			if st.sources > 0 { // the collector is down for a while before the Restore
				advance(r.next())
			}
			m.restore(now)
			e2 := newEngine()
			if err := e2.Restore(snap); err != nil {
				return fmt.Sprintf("op %d: Restore of a fresh %d-byte snapshot: %v", op, len(snap), err)
			}
			if cut := len(snap) * int(cb) / 256; cut < len(snap) {
				if err := newEngine().Restore(snap[:cut]); err == nil {
					return fmt.Sprintf("op %d: a snapshot cut to %d of %d bytes restored", op, cut, len(snap))
				}
			}
			d := slices.Clone(snap)
			d[len(d)*int(cb)/256] ^= fb | 1
			if e3 := newEngine(); e3.Restore(d) == nil { // undetected damage may give odd numbers, not a panic
				e3.Collect(now, func(*Result) {})
				e3.FireAll(func(*Result) {})
			}
			e = e2
			verdicts = [numVerdicts]uint64{}
			checkW(fmt.Sprintf("op %d (Restore)", op))
		case 7: // Collect
			e.Collect(now, onResult)
			m.collect(now)
			checkW(fmt.Sprintf("op %d (Collect)", op))
		}
		if records > 3000 {
			break
		}
	}
	if len(problems) > 0 {
		return strings.Join(problems[:min(len(problems), 10)], "\n")
	}
	if s := e.Stats(); s.verdicts != verdicts {
		return fmt.Sprintf("Stats().verdicts = %v, the Adds since the last Restore returned %v", s.verdicts, verdicts)
	}
	e.FireAll(onResult)
	m.fireAll()
	if len(problems) > 0 {
		return strings.Join(problems[:min(len(problems), 10)], "\n")
	}
	bad := conservationProblems(e, m, carried, tf, size)
	slices.Sort(bad)
	return strings.Join(bad[:min(len(bad), 10)], "\n")
}

// fuzzWeights are the weights of the records the input weighs: small and large adjusted counts.
var fuzzWeights = []uint32{2, 3, 4, 10, 100, 1000, 1 << 20}

// fuzzDist returns the values of a distribution record: the finite ones of the values of bytes vb,
// tb and jb, as long as their sum stays finite (a Distribution's Sum is), and 1 if none is.
func fuzzDist(vb, tb, jb byte) []float64 {
	var vs []float64
	sum := 0.0
	for _, b := range []byte{vb, tb, jb} {
		if v := fuzzValue(b); finite(v) && finite(sum+v) {
			vs = append(vs, v)
			sum += v
		}
	}
	if len(vs) == 0 {
		vs = append(vs, 1)
	}
	return vs
}

// stageSpan is Batch.stage for record r, of its weight, as span n (see spanOf).
func stageSpan(b *Batch, r *refRec, tag int32, n uint64) Verdict {
	if vd := b.Check(r.t); vd != OnTime {
		b.verdicts[r.agg][vd]++
		return vd
	}
	if r.dist != nil {
		b.StageDistribution(&Record{Agg: r.agg, Key: []byte(r.key), Time: r.t, Tag: tag}, distOf(&b.e.aggs[r.agg], r))
		return OnTime
	}
	trace, span := spanOf(n)
	b.StageChecked(&Record{Agg: r.agg, Key: []byte(r.key), Time: r.t, Value: r.v, Tag: tag, TraceID: trace, SpanID: span, Weight: r.w})
	return OnTime
}
