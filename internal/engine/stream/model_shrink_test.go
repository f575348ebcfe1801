package stream

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Shrinking a failing stream.

// ddmin removes as many of n items as it can while fails(keep) holds, by halving chunk sizes.
func ddmin(n int, fails func(keep []bool) bool, budget *int) []bool {
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = true
	}
	for chunk := max(n/2, 1); chunk >= 1; chunk /= 2 {
		for start := 0; start < n && *budget > 0; start += chunk {
			try := slices.Clone(keep)
			changed := false
			for i := start; i < min(start+chunk, n); i++ {
				changed = changed || try[i]
				try[i] = false
			}
			if !changed {
				continue
			}
			*budget--
			if fails(try) {
				keep = try
			}
		}
		if chunk == 1 {
			break
		}
	}
	return keep
}

func shrinkScenario(sc *scenario, opt runOptions) *scenario {
	fails := func(s *scenario) bool { return runScenario(s, opt) != nil }
	f := runScenario(sc, opt)
	if f == nil {
		return sc
	}
	cur := sc
	if f.op < len(cur.ops) {
		cur = cur.withOps(slices.Clone(cur.ops[:f.op+1]))
	}
	budget := 4000
	for round := 0; round < 4 && budget > 0; round++ {
		before := fmt.Sprint(len(cur.ops), cur.records())
		// drop ops
		keep := ddmin(len(cur.ops), func(keep []bool) bool {
			var ops []scenOp
			for i, k := range keep {
				if k {
					ops = append(ops, cur.ops[i])
				}
			}
			return fails(cur.withOps(ops))
		}, &budget)
		var ops []scenOp
		for i, k := range keep {
			if k {
				ops = append(ops, cur.ops[i])
			}
		}
		cur = cur.withOps(ops)
		// drop records
		type ref struct{ op, rec int }
		var all []ref
		for i, op := range cur.ops {
			for j := range op.recs {
				all = append(all, ref{i, j})
			}
		}
		build := func(keep []bool) *scenario {
			ops := make([]scenOp, len(cur.ops))
			for i, op := range cur.ops {
				ops[i] = op
				ops[i].recs = nil
			}
			for k, r := range all {
				if keep[k] {
					ops[r.op].recs = append(ops[r.op].recs, cur.ops[r.op].recs[r.rec])
				}
			}
			return cur.withOps(ops)
		}
		cur = build(ddmin(len(all), func(keep []bool) bool { return fails(build(keep)) }, &budget))
		// simplify: Collect at the batch's wall time, no snapshots
		for i := range cur.ops {
			for _, edit := range []func(op *scenOp){
				func(op *scenOp) { op.collectNow = op.batchNow },
				func(op *scenOp) { op.snapBeforeCollect = false },
				func(op *scenOp) { op.snapAfterCollect = false },
				func(op *scenOp) { op.restoreAt = min(op.restoreAt, op.collectNow) },
			} {
				ops := slices.Clone(cur.ops)
				edit(&ops[i])
				if budget--; fmt.Sprintf("%+v", ops[i]) != fmt.Sprintf("%+v", cur.ops[i]) && fails(cur.withOps(ops)) {
					cur = cur.withOps(ops)
				}
			}
		}
		if fmt.Sprint(len(cur.ops), cur.records()) == before {
			break
		}
	}
	return cur
}

// describeScenario prints a stream as Go-like data, with times relative to its base.
func describeScenario(sc *scenario) string {
	var b strings.Builder
	tf := timeFmt{sc.base}
	fmt.Fprintf(&b, "config %s\nseed %d, base wall clock %d\n", sc.cfg, sc.seed, sc.base)
	for i, op := range sc.ops {
		fmt.Fprintf(&b, "op %d: Begin(base%+v)", i, time.Duration(op.batchNow-sc.base))
		for j, r := range op.recs {
			if sc.cfg.perSource && newSource(op.recs, j) {
				fmt.Fprintf(&b, " SetSource(%q)", r.src)
			}
			fmt.Fprintf(&b, " record(%d, %q, %s, %g", r.agg, r.key, tf.t(r.t), r.v)
			if r.w > 1 {
				fmt.Fprintf(&b, ", weight %d", r.w)
			}
			if r.dist != nil {
				fmt.Fprintf(&b, ", dist %v, minmax %v", r.dist, !r.noMinMax)
			}
			b.WriteString(")")
		}
		fmt.Fprintf(&b, " End()")
		if op.snapBeforeCollect {
			b.WriteString(" Snapshot+Restore")
		}
		fmt.Fprintf(&b, " Collect(base%+v)", time.Duration(op.collectNow-sc.base))
		if op.snapAfterCollect {
			fmt.Fprintf(&b, " Snapshot+Restore(base%+v)", time.Duration(max(op.restoreAt, op.collectNow)-sc.base))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// reportFailure shrinks sc and writes the minimal stream, its full trace and the mismatch.
func reportFailure(t *testing.T, sc *scenario, opt runOptions, f *runFailure) {
	t.Helper()
	small := shrinkScenario(sc, opt)
	sf := runScenario(small, opt)
	var trace []string
	topt := opt
	topt.trace = &trace
	runScenario(small, topt)
	if sf == nil { // should not happen: the shrinker keeps a failing stream
		small, sf = sc, f
	}
	t.Errorf("%s seed %d: engine and model disagree %s\n\nminimal failing stream (%d ops, %d records, shrunk from %d ops, %d records):\n%s\nits mismatch %s\n\ntrace:\n%s",
		sc.cfg.name, sc.seed, f, len(small.ops), small.records(), len(sc.ops), sc.records(),
		describeScenario(small), sf, strings.Join(trace, "\n"))
}

func seedsFor(c *modelConfig) int {
	if s := os.Getenv("STREAM_MODEL_SEEDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	if testing.Short() {
		return max(c.seeds/5, 1)
	}
	return c.seeds
}

// scenarios holds streams drawn once for two runs: TestEngineMatchesReferenceModel and
// TestStagedBatchesMatchReferenceModel run the same ones; the second run takes it out.
var scenarios sync.Map

// sharedScenario returns genScenario(c, seed), drawn once for two callers when share is set.
func sharedScenario(c *modelConfig, seed uint64, share bool) *scenario {
	if !share {
		return genScenario(c, seed)
	}
	k := fmt.Sprintf("%s/%d", c.name, seed)
	if sc, ok := scenarios.LoadAndDelete(k); ok {
		return sc.(*scenario)
	}
	sc := genScenario(c, seed)
	scenarios.Store(k, sc)
	return sc
}

// runSeeds runs every seed of c with opt, reports the first failing one in full and the rest briefly.
func runSeeds(t *testing.T, c *modelConfig, opt runOptions) {
	only := os.Getenv("STREAM_MODEL_ONLY")
	var failed []uint64
	for s := range seedsFor(c) {
		seed := uint64(s)
		if only != "" && only != fmt.Sprintf("%s:%d", c.name, seed) {
			continue
		}
		sc := sharedScenario(c, seed, !opt.snapshots)
		if only != "" {
			var trace []string
			o := opt
			o.trace = &trace
			f := runScenario(sc, o)
			t.Logf("%s\n%s\nresult: %v", describeScenario(sc), strings.Join(trace, "\n"), f)
		}
		f := runScenario(sc, opt)
		if f == nil {
			continue
		}
		failed = append(failed, seed)
		switch {
		case len(failed) == 1:
			reportFailure(t, sc, opt, f)
		case len(failed) <= 4:
			t.Errorf("%s seed %d also fails %s", c.name, seed, f)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%s: %d of %d seeds failed: %v (rerun one with STREAM_MODEL_ONLY=%s:%d)",
			c.name, len(failed), seedsFor(c), failed, c.name, failed[0])
	}
}
