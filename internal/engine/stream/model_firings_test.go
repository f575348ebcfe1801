package stream

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/hll"
)

// Firings, as reported by the engine or computed by the model.

type firingRec struct {
	Agg                                 int
	Key                                 string
	Overflow                            bool
	Start, End                          int64
	Late                                bool
	Count, ValueCount, WindowValueCount uint64
	Sum, Avg, Min, Max                  float64
	Quantiles                           []float64
	Values                              []float64 // the accumulators' (Result.Values)

	HasHist                bool
	HistCount, HistBuckets uint64 // HistBuckets: zero count + every bucket count
	HistSum                float64
	HistScale              int32
	HistZero               uint64
	HistPosOff, HistNegOff int32
	HistPos, HistNeg       []uint64

	absSum, wholeAbsSum float64 // model only: the scale of the sums, for their tolerance
	spreadScale         float64 // model only: the greatest squared value of the spread, for its tolerance
}

type firingID struct {
	Agg      int
	Overflow bool
	Key      string
	Start    int64
	Late     bool
}

func (f *firingRec) id() firingID { return firingID{f.Agg, f.Overflow, f.Key, f.Start, f.Late} }

type windowID struct {
	Agg      int
	Overflow bool
	Key      string
	Start    int64
}

func (f *firingRec) window() windowID { return windowID{f.Agg, f.Overflow, f.Key, f.Start} }

// cmpFiringID orders firings by aggregation, regular series before the overflow one, key, window start,
// and first firing before late.
func cmpFiringID(a, b firingID) int {
	return cmp.Or(
		cmp.Compare(a.Agg, b.Agg),
		cmpBool(a.Overflow, b.Overflow),
		cmp.Compare(a.Key, b.Key),
		cmp.Compare(a.Start, b.Start),
		cmpBool(a.Late, b.Late),
	)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func sortFirings(fs []firingRec) {
	slices.SortStableFunc(fs, func(a, b firingRec) int { return cmpFiringID(a.id(), b.id()) })
}

func firingFromResult(r *Result) firingRec { return copyFiring(r, true) }

// copyFiring copies r; with buckets the histogram's bucket counts too, for a bit-for-bit comparison,
// else only their total.
func copyFiring(r *Result, buckets bool) firingRec {
	f := firingRec{Agg: r.Agg, Key: r.Key, Overflow: r.Overflow, Start: r.Start, End: r.End, Late: r.late,
		Count: r.Count, ValueCount: r.ValueCount, WindowValueCount: r.WindowValueCount,
		Sum: r.Sum, Avg: r.Avg, Min: r.Min, Max: r.Max, Quantiles: slices.Clone(r.Quantiles), Values: slices.Clone(r.Values)}
	if h := r.Hist; h != nil {
		f.HasHist = true
		f.HistCount, f.HistSum, f.HistScale, f.HistZero = h.Count(), h.Sum(), h.Scale(), h.ZeroCount()
		// At the sketch's own scale: its buckets as they are.
		f.HistPosOff, f.HistPos = h.AppendPositiveCountsAt(nil, h.Scale())
		f.HistNegOff, f.HistNeg = h.AppendNegativeCountsAt(nil, h.Scale())
		f.HistBuckets = f.HistZero
		for _, c := range f.HistPos {
			f.HistBuckets += c
		}
		for _, c := range f.HistNeg {
			f.HistBuckets += c
		}
		if !buckets {
			f.HistPos, f.HistNeg = nil, nil
		}
	}
	return f
}

func collectFirings(e *Engine, now int64) []firingRec { return collectFiringsOf(e, now, true) }

// collectFiringsOf is collectFirings, with the histograms' bucket counts or only their totals (see
// copyFiring).
func collectFiringsOf(e *Engine, now int64, buckets bool) []firingRec {
	var out []firingRec
	e.Collect(now, windowsOnly(func(r *Result) { out = append(out, copyFiring(r, buckets)) }))
	sortFirings(out)
	return out
}

func fireAllFirings(e *Engine) []firingRec { return fireAllFiringsOf(e, true) }

func fireAllFiringsOf(e *Engine, buckets bool) []firingRec {
	var out []firingRec
	e.FireAll(windowsOnly(func(r *Result) { out = append(out, copyFiring(r, buckets)) }))
	sortFirings(out)
	return out
}

// clock-relative formatting for messages

type timeFmt struct{ base int64 }

func (tf timeFmt) t(v int64) string {
	switch v {
	case math.MinInt64:
		return "-inf"
	case math.MaxInt64:
		return "+inf"
	}
	return fmt.Sprintf("%d(base%+v)", v, time.Duration(v-tf.base))
}

func (tf timeFmt) window(start, end int64) string {
	return fmt.Sprintf("[%v, %v)", time.Duration(start-tf.base), time.Duration(end-tf.base))
}

func (tf timeFmt) firing(f *firingRec) string {
	kind := "first"
	if f.Late {
		kind = "LATE"
	}
	key := strconv.Quote(f.Key)
	if f.Overflow {
		key = "<overflow>"
	}
	s := fmt.Sprintf("agg%d %s %s %s count=%d valueCount=%d sum=%g windowValueCount=%d",
		f.Agg, key, tf.window(f.Start, f.End), kind, f.Count, f.ValueCount, f.Sum, f.WindowValueCount)
	if f.WindowValueCount > 0 {
		s += fmt.Sprintf(" avg=%g min=%g max=%g q=%v", f.Avg, f.Min, f.Max, f.Quantiles)
	}
	if len(f.Values) > 0 {
		s += fmt.Sprintf(" values=%v", f.Values)
	}
	if f.HasHist {
		s += fmt.Sprintf(" hist{count=%d sum=%g buckets=%d}", f.HistCount, f.HistSum, f.HistBuckets)
	}
	return s
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// compareToModel compares the engine's firings of one Collect with the model's.
func compareToModel(tf timeFmt, aggs []Aggregation, want, got []firingRec) []string {
	var out []string
	gotByID := map[firingID]*firingRec{}
	for i := range got {
		g := &got[i]
		if gotByID[g.id()] != nil {
			out = append(out, "  duplicate firing: "+tf.firing(g))
		}
		gotByID[g.id()] = g
	}
	for i := range want {
		w := &want[i]
		g := gotByID[w.id()]
		if g == nil {
			out = append(out, "  missing firing:    want "+tf.firing(w))
			continue
		}
		delete(gotByID, w.id())
		var bad []string
		check := func(ok bool, what string) {
			if !ok {
				bad = append(bad, what)
			}
		}
		check(g.End == w.End, "end")
		check(g.Count == w.Count, "count")
		check(g.ValueCount == w.ValueCount, "valueCount")
		check(g.WindowValueCount == w.WindowValueCount, "windowValueCount")
		check(within(g.Sum, w.Sum, 1e-9*w.absSum), "sum")
		if w.WindowValueCount > 0 && g.WindowValueCount == w.WindowValueCount {
			check(within(g.Avg, w.Avg, 1e-9*w.wholeAbsSum/float64(w.WindowValueCount)), "avg")
			check(g.Min == w.Min, "min")
			check(g.Max == w.Max, "max")
			if len(g.Quantiles) != len(w.Quantiles) {
				check(false, "len(quantiles)")
			} else {
				for k := range w.Quantiles {
					check(within(g.Quantiles[k], w.Quantiles[k], 0.01*math.Abs(w.Quantiles[k])),
						fmt.Sprintf("quantile %v", aggs[w.Agg].Quantiles[k]))
				}
			}
		}
		if len(g.Values) != len(w.Values) {
			check(false, "len(values)")
		} else {
			for k, kind := range aggs[w.Agg].Accumulators {
				switch kind.Name {
				case SpreadKind.Name: // Welford and Chan's merges against two passes
					check(within(g.Values[k], w.Values[k], 1e-9*w.Values[k]+1e-12*w.spreadScale), "stdvar")
				default: // distinct: exact up to hll.ExactMax, estimated above
					check(g.Values[k] == w.Values[k] || w.Values[k] > hll.ExactMax && within(g.Values[k], w.Values[k], 0.1*w.Values[k]), "distinct")
				}
			}
		}
		check(g.HasHist == w.HasHist, "hist presence")
		if g.HasHist && w.HasHist {
			check(g.HistCount == w.HistCount, "hist count")
			check(within(g.HistSum, w.HistSum, 1e-9*w.absSum), "hist sum")
			check(g.HistBuckets == g.HistCount, "hist bucket counts add up to its count")
		}
		if len(bad) > 0 {
			out = append(out, fmt.Sprintf("  wrong %s:\n    want %s\n    got  %s",
				strings.Join(bad, ", "), tf.firing(w), tf.firing(g)))
		}
	}
	var extra []firingRec
	for _, g := range gotByID {
		extra = append(extra, *g)
	}
	sortFirings(extra)
	for i := range extra {
		out = append(out, "  unexpected firing: got  "+tf.firing(&extra[i]))
	}
	return out
}

func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// sameFiring reports whether two firings are identical, floats bit for bit.
func sameFiring(a, b *firingRec) bool {
	return a.id() == b.id() && a.End == b.End && a.Count == b.Count && a.ValueCount == b.ValueCount &&
		a.WindowValueCount == b.WindowValueCount && sameFloat(a.Sum, b.Sum) && sameFloat(a.Avg, b.Avg) &&
		sameFloat(a.Min, b.Min) && sameFloat(a.Max, b.Max) && slices.EqualFunc(a.Quantiles, b.Quantiles, sameFloat) &&
		a.HasHist == b.HasHist && a.HistCount == b.HistCount && a.HistBuckets == b.HistBuckets &&
		sameFloat(a.HistSum, b.HistSum) && a.HistScale == b.HistScale && a.HistZero == b.HistZero &&
		a.HistPosOff == b.HistPosOff && a.HistNegOff == b.HistNegOff &&
		slices.Equal(a.HistPos, b.HistPos) && slices.Equal(a.HistNeg, b.HistNeg)
}

// compareStrict requires two engines' firings of one Collect to be identical.
func compareStrict(tf timeFmt, want, got []firingRec) []string {
	var out []string
	n := max(len(want), len(got))
	for i := range n {
		switch {
		case i >= len(got):
			out = append(out, "  missing firing:    want "+tf.firing(&want[i]))
		case i >= len(want):
			out = append(out, "  unexpected firing: got  "+tf.firing(&got[i]))
		case !sameFiring(&want[i], &got[i]):
			out = append(out, fmt.Sprintf("  differs:\n    want %+v\n    got  %+v", want[i], got[i]))
		}
	}
	return out
}
