package stream

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// Running a stream against the engine.

type runFailure struct {
	op    int // the op at which the first mismatch showed; len(ops) for FireAll and the final accounting
	final bool
	lines []string
}

func (f *runFailure) String() string {
	if f.final {
		return fmt.Sprintf("at the final FireAll and accounting:\n%s", strings.Join(f.lines, "\n"))
	}
	return fmt.Sprintf("at op %d:\n%s", f.op, strings.Join(f.lines, "\n"))
}

type runOptions struct {
	snapshots bool            // honour the ops' snapshot flags; compare firings with an uninterrupted engine
	staged    bool            // stage each batch and Apply it, instead of one record at a time
	trace     *[]string       // if set, gets a line per step
	onEngine  func(e *Engine) // called after each op with the engine under test
}

func newModelEngine(c *modelConfig, now int64) (*Engine, *clock.Fake) {
	clk := clock.NewFake(time.Unix(0, now))
	e, err := New(c.engineConfig(clk))
	if err != nil {
		panic(err)
	}
	return e, clk
}

// snapshotAndRestore restores a snapshot of e, taken at its clock's time, into a fresh engine whose
// clock reads restoreAt, with another shard count (which a snapshot does not fix) every other time.
func snapshotAndRestore(c *modelConfig, e *Engine, restoreAt int64) (*Engine, *clock.Fake, error) {
	snap := e.Snapshot(nil)
	c2 := *c
	c2.shards = []int{1, 0, 3, 64}[restores.Add(1)%4]
	e2, clk := newModelEngine(&c2, restoreAt)
	if err := e2.Restore(snap); err != nil {
		return nil, nil, fmt.Errorf("Restore of a %d-byte snapshot: %w", len(snap), err)
	}
	clear(snap) // the restored engine must hold nothing of the snapshot's bytes
	return e2, clk, nil
}

var restores atomic.Int64 // spreads the shard counts of restored engines

// newSource reports whether record j of recs comes from another source than the one before it: where
// a batch names the source of the records that follow.
func newSource(recs []refRec, j int) bool { return j == 0 || recs[j].src != recs[j-1].src }

// runScenario drives the engine and the model through sc and returns the first mismatch, or nil.
//
// With opt.snapshots the engine is snapshotted and restored at the ops' marks, and held to the model
// and, bit for bit, to an engine that runs the stream uninterrupted (ref). A restore starts the idle
// rule's and the sources' silences afresh (the collector was not running), so the two engines can part:
// mU, the model of the uninterrupted engine, tells when W first differs, and from then on only the
// model counts.
func runScenario(sc *scenario, opt runOptions) *runFailure {
	c := sc.cfg
	tf := timeFmt{sc.base}
	e, clk := newModelEngine(c, sc.base)
	var ref *Engine
	var refClk *clock.Fake
	var mU *refModel
	if opt.snapshots {
		ref, refClk = newModelEngine(c, sc.base)
		mU = newRefModel(c)
		mU.quiet = true
	}
	m := newRefModel(c)
	trace := func(format string, args ...any) {
		if opt.trace != nil {
			*opt.trace = append(*opt.trace, fmt.Sprintf(format, args...))
		}
	}
	part := func(when string) {
		if ref != nil && mU.watermark() != m.watermark() {
			trace("  %s: W %s restored, %s uninterrupted: the uninterrupted engine no longer counts",
				when, tf.t(m.watermark()), tf.t(mU.watermark()))
			ref = nil
		}
	}
	totals := map[windowID]uint64{}
	var tally [numVerdicts]uint64
	var firsts, lates uint64
	account := func(fs []firingRec) {
		for i := range fs {
			totals[fs[i].window()] += fs[i].Count
			if fs[i].Late {
				lates++
			} else {
				firsts++
			}
		}
	}
	compare := func(want, got, refGot []firingRec, withRef bool) []string {
		out := compareToModel(tf, c.aggs, want, got)
		if withRef {
			out = append(out, compareStrict(tf, refGot, got)...)
		}
		return out
	}
	traceFirings := func(what string, want, got []firingRec) {
		if opt.trace == nil {
			return
		}
		for i := range want {
			trace("    model  %s: %s", what, tf.firing(&want[i]))
		}
		for i := range got {
			trace("    engine %s: %s", what, tf.firing(&got[i]))
		}
	}
	var key []byte // the key buffer given to stage, scribbled on after each record: the engine must copy it
	for i, op := range sc.ops {
		var lines []string
		clk.Set(time.Unix(0, op.batchNow))
		b := e.Begin(op.batchNow)
		mb := m.begin(op.batchNow)
		if opt.trace != nil {
			trace("op %d: batch at wall %s, W at Begin %s", i, tf.t(op.batchNow), tf.t(mb.watermarkOrInf()))
		}
		var rb *Batch
		var ub *refBatch
		if mU != nil {
			ub = mU.begin(op.batchNow)
			part("at Begin")
		}
		if ref != nil {
			refClk.Set(time.Unix(0, op.batchNow))
			rb = ref.Begin(op.batchNow)
		}
		// With opt.staged every record is staged and the batch applied at the end, so a verdict is
		// known only then: engineVerdicts holds them by record. engineShared holds what SetSource
		// said where the source changes.
		engineVerdicts := make([]Verdict, len(op.recs))
		engineShared := make([]bool, len(op.recs))
		if opt.staged {
			for j, r := range op.recs {
				if c.perSource && newSource(op.recs, j) {
					engineShared[j] = b.SetSource([]byte(r.src))
				}
				key = append(key[:0], r.key...)
				engineVerdicts[j] = stageRec(b, &r, key, int32(j))
				for k := range key {
					key[k] = '#'
				}
			}
			b.Apply(func(tag int32, vd Verdict, _ int64) {
				if engineVerdicts[tag] != OnTime {
					panic(fmt.Sprintf("Apply reported record %d twice or after stage refused it", tag))
				}
				engineVerdicts[tag] = vd
			})
		}
		for j, r := range op.recs {
			if c.perSource && newSource(op.recs, j) {
				if !opt.staged {
					engineShared[j] = b.SetSource([]byte(r.src))
				}
				want := mb.source(r.src)
				if ub != nil {
					ub.source(r.src)
				}
				if rb != nil {
					rb.SetSource([]byte(r.src))
				}
				if opt.trace != nil {
					trace("  source %q: model shared=%v, engine shared=%v", r.src, want, engineShared[j])
				}
				if engineShared[j] != want {
					lines = append(lines, fmt.Sprintf("  record %d: SetSource(%q) reported shared=%v, want %v", j, r.src, engineShared[j], want))
				}
			}
			var got Verdict
			if opt.staged {
				got = engineVerdicts[j]
			} else {
				key = append(key[:0], r.key...)
				got = addRec(b, &r, key)
				for k := range key {
					key[k] = '#'
				}
			}
			want := mb.addRec(r)
			if ub != nil {
				ub.addRec(r)
			}
			if got < numVerdicts {
				tally[got]++
			}
			if opt.trace != nil {
				trace("  rec %d: agg%d key=%q t=%s v=%g weight=%d -> model %v, engine %v", j, r.agg, r.key, tf.t(r.t), r.v, r.weight(), want, got)
			}
			if got != want {
				var fates []string
				if r.t > 0 && r.t <= op.batchNow+m.skew {
					for _, s := range m.windowStarts(r.t) {
						fates = append(fates, fmt.Sprintf("%s:%v", tf.window(s, s+m.size), mb.windowFate(s)))
					}
				}
				lines = append(lines, fmt.Sprintf("  record %d (agg%d key=%q t=%s v=%g): verdict %v, want %v (W at Begin %s; windows %s)",
					j, r.agg, r.key, tf.t(r.t), r.v, got, want, tf.t(mb.watermarkOrInf()), strings.Join(fates, " ")))
			}
			if rb != nil {
				if rv := addRec(rb, &r, []byte(r.key)); rv != got {
					lines = append(lines, fmt.Sprintf("  record %d: verdict %v, the uninterrupted engine said %v", j, got, rv))
				}
			}
		}
		b.End()
		mb.end()
		if ub != nil {
			ub.end()
			part("after End")
		}
		if rb != nil {
			rb.End()
		}
		if got, want := e.Watermark(), m.watermarkAt(op.batchNow); got != want {
			lines = append(lines, fmt.Sprintf("  after End: Watermark() = %s, want %s", tf.t(got), tf.t(want)))
		}
		if opt.snapshots && op.snapBeforeCollect {
			var err error
			m.snapshot(op.batchNow)
			if e, clk, err = snapshotAndRestore(c, e, op.batchNow); err != nil {
				lines = append(lines, "  "+err.Error())
				return &runFailure{op: i, lines: lines}
			}
			m.restore(op.batchNow)
			trace("  snapshot + restore before Collect")
		}
		clk.Set(time.Unix(0, op.collectNow))
		got := collectFiringsOf(e, op.collectNow, opt.snapshots)
		want := m.collect(op.collectNow)
		if mU != nil {
			mU.collect(op.collectNow)
			part("at Collect")
		}
		var refGot []firingRec
		withRef := ref != nil
		if ref != nil {
			refClk.Set(time.Unix(0, op.collectNow))
			refGot = collectFirings(ref, op.collectNow)
		}
		account(got)
		if opt.trace != nil {
			trace("  collect at wall %s: W model %s, engine %s", tf.t(op.collectNow), tf.t(m.watermark()), tf.t(e.Watermark()))
		}
		traceFirings("fired", want, got)
		if gw, ww := e.Watermark(), m.watermarkAt(op.collectNow); gw != ww {
			lines = append(lines, fmt.Sprintf("  after Collect(%s): Watermark() = %s, want %s", tf.t(op.collectNow), tf.t(gw), tf.t(ww)))
		}
		lines = append(lines, compare(want, got, refGot, withRef)...)
		if opt.snapshots && op.snapAfterCollect {
			restoreAt := max(op.restoreAt, op.collectNow)
			var err error
			m.snapshot(op.collectNow)
			if e, clk, err = snapshotAndRestore(c, e, restoreAt); err != nil {
				lines = append(lines, "  "+err.Error())
				return &runFailure{op: i, lines: lines}
			}
			m.restore(restoreAt)
			if opt.trace != nil {
				trace("  snapshot + restore after Collect, restored at wall %s", tf.t(restoreAt))
			}
		}
		if opt.onEngine != nil && e != nil {
			opt.onEngine(e)
		}
		if len(lines) > 0 {
			return &runFailure{op: i, lines: lines}
		}
	}
	// FireAll, then the accounting of every window.
	var lines []string
	got := fireAllFiringsOf(e, opt.snapshots)
	want := m.fireAll()
	var refGot []firingRec
	withRef := ref != nil
	if ref != nil {
		refGot = fireAllFirings(ref)
	}
	account(got)
	trace("FireAll")
	traceFirings("FireAll", want, got)
	if d := compare(want, got, refGot, withRef); len(d) > 0 {
		lines = append(lines, "  FireAll:")
		lines = append(lines, d...)
	}
	for id, n := range m.added {
		if g := totals[windowID{id.agg, false, id.key, id.start}]; g != n {
			lines = append(lines, fmt.Sprintf("  accounting: window agg%d %q %s: firings carried %d records in all, %d were added",
				id.agg, id.key, tf.window(id.start, id.start+m.size), g, n))
		}
	}
	for id, n := range totals {
		if id.Overflow || m.added[refWinID{id.Agg, id.Key, id.Start}] == 0 {
			lines = append(lines, fmt.Sprintf("  accounting: window agg%d %q overflow=%v %s: firings carried %d records, none was added",
				id.Agg, id.Key, id.Overflow, tf.window(id.Start, id.Start+m.size), n))
		}
	}
	if !opt.snapshots {
		st := e.Stats()
		if st.verdicts != tally {
			lines = append(lines, fmt.Sprintf("  Stats().verdicts = %v, the Adds returned %v", st.verdicts, tally))
		}
		if st.WindowsFired != firsts || st.LateFirings != lates {
			lines = append(lines, fmt.Sprintf("  Stats() WindowsFired=%d LateFirings=%d, handed out %d first and %d late firings",
				st.WindowsFired, st.LateFirings, firsts, lates))
		}
		for a, n := range st.ActiveSeries {
			if n != 0 {
				lines = append(lines, fmt.Sprintf("  after FireAll: Stats().ActiveSeries[%d] = %d, want 0", a, n))
			}
		}
	}
	if len(lines) > 0 {
		return &runFailure{op: len(sc.ops), final: true, lines: lines}
	}
	return nil
}
