package stream

import (
	"math"
	"testing"
	"time"
)

// Distributions whose counts do not fit, or that say nothing of their values: counts saturate at
// 2^64-1 instead of wrapping, a distribution without values counts in count alone, and bucket counts
// of the wrong length are left out, never indexed past the aggregation's buckets.

// stageDists stages distributions ds of key "k" at t seconds for aggregation 0, applies them, and
// moves the wall clock and W past the window [0, 10 s) (a record at 25 s).
func stageDists(h *harness, ds ...*Distribution) {
	h.t.Helper()
	b := h.e.Begin(h.clk.Now())
	for _, d := range ds {
		if b.Check(1*sec) != OnTime {
			h.t.Fatal("a record at 1 s is not on time")
		}
		b.StageDistribution(&Record{Agg: 0, Key: []byte("k"), Time: 1 * sec}, d)
	}
	b.Apply(func(int32, Verdict, int64) {})
	b.End()
	h.clk.Set(time.Unix(30, 0))
	h.batch(rec{key: "other", t: 25, v: 1})
}

// pointOf returns the first firing's point of key "k".
func pointOf(h *harness) *Point {
	var p *Point
	h.e.Collect(h.clk.Now(), func(r *Result) {
		if r.Key == "k" && p == nil && r.HasPoint {
			c := r.Point
			c.BucketCounts = append([]uint64(nil), r.Point.BucketCounts...)
			p = &c
		}
	})
	if p == nil {
		h.t.Fatal("no point for k")
	}
	return p
}

func TestCountsSaturateInsteadOfWrapping(t *testing.T) {
	for _, cumulative := range []bool{false, true} {
		cfg := Config{Size: 10 * time.Second, Cumulative: cumulative, FoldLate: cumulative, SeriesExpiration: time.Minute,
			Aggregations: []Aggregation{{Bounds: []float64{1}, Histogram: true}}}
		h := newHarness(t, cfg)
		h.clk.Set(time.Unix(0, 0))
		huge := uint64(1)<<63 + 5
		d := func() *Distribution {
			return &Distribution{Count: huge, Sum: 1, Buckets: []uint64{huge, 0}}
		}
		stageDists(h, d(), d(), &Distribution{Count: 3, Sum: 3, Buckets: []uint64{1, 2}})
		p := pointOf(h)
		// 2^63+5 twice is past 2^64-1: every count stays at the greatest, none wraps to 10 or to 13.
		if p.Count != math.MaxUint64 || p.ValueCount != math.MaxUint64 {
			t.Fatalf("cumulative %v: count %d, values %d, want 2^64-1", cumulative, p.Count, p.ValueCount)
		}
		if p.BucketCounts[0] != math.MaxUint64 || p.BucketCounts[1] != 2 {
			t.Fatalf("cumulative %v: bucket counts %v, want [2^64-1 2]", cumulative, p.BucketCounts)
		}
	}
}

func TestDistributionWithoutValuesCountsInCountAlone(t *testing.T) {
	cfg := Config{Size: 10 * time.Second, Aggregations: []Aggregation{{Bounds: []float64{1}, Quantiles: []float64{0.5}}}}
	h := newHarness(t, cfg)
	h.clk.Set(time.Unix(0, 0))
	// 10^10 values without a sum (past a weight's 2^32-1), whatever its other fields say, beside
	// 2 values of sum 3 in bucket (1, +Inf).
	stageDists(h, &Distribution{Count: 1e10, Sum: 99, Min: -5, Max: 50, HasMinMax: true, NoValues: true, Buckets: []uint64{1e10, 0}},
		&Distribution{Count: 2, Sum: 3, Min: 1.5, Max: 1.5, HasMinMax: true, Buckets: []uint64{0, 2}})
	var got *fired
	h.e.Collect(h.clk.Now(), windowsOnly(func(r *Result) {
		if r.Key == "k" {
			f := copyResult(r)
			got = &f
		}
	}))
	if got == nil {
		t.Fatal("no firing for k")
	}
	if got.Count != 1e10+2 || got.ValueCount != 2 || got.Sum != 3 || got.Min != 1.5 || got.Max != 1.5 {
		t.Fatalf("count %d, values %d, sum %v, min %v, max %v; want 10000000002, 2, 3, 1.5, 1.5",
			got.Count, got.ValueCount, got.Sum, got.Min, got.Max)
	}
}

func TestBucketCountsOfAnotherLengthAreLeftOut(t *testing.T) {
	cfg := Config{Size: 10 * time.Second, Aggregations: []Aggregation{{Bounds: []float64{0.1, 0.5, 1, 5}}}}
	h := newHarness(t, cfg)
	h.clk.Set(time.Unix(0, 0))
	stageDists(h, &Distribution{Count: 6, Sum: 6, Buckets: []uint64{1, 1, 1, 1, 1, 1}},
		&Distribution{Count: 4, Sum: 4, Buckets: []uint64{2, 2}},
		&Distribution{Count: 5, Sum: 5, Buckets: []uint64{1, 1, 1, 1, 1}})
	p := pointOf(h)
	if p.Count != 15 || len(p.BucketCounts) != 5 {
		t.Fatalf("count %d, bucket counts %v", p.Count, p.BucketCounts)
	}
	for i, c := range p.BucketCounts {
		if c != 1 {
			t.Fatalf("bucket counts %v, want the last distribution's alone, [1 1 1 1 1] (bucket %d)", p.BucketCounts, i)
		}
	}
}
